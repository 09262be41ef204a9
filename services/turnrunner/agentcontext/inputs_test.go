package agentcontext

import (
	"reflect"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

func TestWithoutTurn(t *testing.T) {
	msgs := []protocol.Message{
		{Role: "user", Content: "a", TurnID: "t1"},
		{Role: "assistant", Content: "b", TurnID: "t1"},
		{Role: "user", Content: "old file line"}, // written before turn ids existed
		{Role: "user", Content: "now", TurnID: "t2"},
	}
	evs := []protocol.ToolEvent{{TurnID: "t1", Name: "read_file"}, {TurnID: "t2", Name: "bash"}}
	tests := []struct {
		turn      string
		wantMsgs  []string
		wantTools []string
	}{
		{"t2", []string{"a", "b", "old file line"}, []string{"read_file"}},
		{"t1", []string{"old file line", "now"}, []string{"bash"}},
		{"t3", []string{"a", "b", "old file line", "now"}, []string{"read_file", "bash"}},
	}
	for _, tc := range tests {
		gotM, gotT := withoutTurn(msgs, evs, tc.turn)
		var contents, names []string
		for _, m := range gotM {
			contents = append(contents, m.Content)
		}
		for _, e := range gotT {
			names = append(names, e.Name)
		}
		if !reflect.DeepEqual(contents, tc.wantMsgs) || !reflect.DeepEqual(names, tc.wantTools) {
			t.Errorf("turn %s: messages %v tools %v, want %v %v", tc.turn, contents, names, tc.wantMsgs, tc.wantTools)
		}
	}
}

func TestStartOfDayUTC(t *testing.T) {
	in := time.Date(2026, 1, 1, 1, 0, 0, 0, time.FixedZone("ahead", 3*3600)) // 31 Dec 22:00 UTC
	if got := startOfDayUTC(in).Format(time.RFC3339); got != "2025-12-31T00:00:00Z" {
		t.Errorf("start of day %s", got)
	}
}
