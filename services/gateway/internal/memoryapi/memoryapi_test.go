package memoryapi

import (
	"encoding/json"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/input"
)

func TestParseLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{{"", 50}, {"10", 10}, {"10abc", 10}, {" 7 ", 7}, {"0", 50}, {"-3", 50}, {"abc", 50}, {"1000", 1000}} {
		if got := parseLimit(c.in, 50); got != c.want {
			t.Errorf("parseLimit(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestImportanceField(t *testing.T) {
	for _, c := range []struct {
		body    string
		want    string
		wantErr bool
	}{
		{`{}`, "", false},
		{`{"importance":null}`, "", false},
		{`{"importance":"critical"}`, "critical", false},
		{`{"importance":"huge"}`, "huge", false}, // the store rejects it with the list
		{`{"importance":4}`, "critical", false},
		{`{"importance":1}`, "temporary", false},
		{`{"importance":9}`, "", true},
		{`{"importance":[1]}`, "", true},
	} {
		var f input.Fields
		if err := json.Unmarshal([]byte(c.body), &f); err != nil {
			t.Fatal(err)
		}
		got, err := importanceField(f)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("%s: %q, %v", c.body, got, err)
		}
		if err != nil && protocol.KindOf(err) != protocol.Invalid {
			t.Errorf("%s: kind %s", c.body, protocol.KindOf(err))
		}
	}
}
