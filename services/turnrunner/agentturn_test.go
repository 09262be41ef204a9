package turnrunner

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

func TestConfigDefaults(t *testing.T) {
	c := Config{DataDir: t.TempDir()}
	if err := c.prepare(); err != nil {
		t.Fatal(err)
	}
	tc := c.toolsConfig()
	if !tc.EnableBash || tc.BashTimeout != 30*time.Second || tc.BashOutputLimit != 64<<10 || tc.ReadLimit != 256<<10 {
		t.Errorf("tools config %+v", tc)
	}
	ac := c.agentConfig()
	if ac.MaxSteps != 200 || ac.MaxRetries != 3 || ac.RetryBackoff != time.Second || ac.BaseURL != "http://localhost:4000/v1" {
		t.Errorf("agent config %+v", ac)
	}
	off := Config{DataDir: t.TempDir(), EnableBash: BashOff, BashTimeout: time.Hour, BashMaxTimeout: time.Minute}
	if err := off.prepare(); err == nil {
		t.Errorf("bash timeout above its cap accepted")
	}
	off.BashMaxTimeout = 2 * time.Hour
	if err := off.prepare(); err != nil || off.toolsConfig().EnableBash {
		t.Errorf("disable bash: err %v, config %+v", err, off.toolsConfig())
	}
}
