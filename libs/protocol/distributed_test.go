package protocol

import (
	"testing"
	"time"
)

func TestOrphanCheck(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type obs struct {
		at       time.Duration
		rev      uint64
		terminal bool
		want     bool
	}
	tests := []struct {
		name string
		obs  []obs
	}{
		{"renewed lease is never orphaned", []obs{{0, 5, false, false}, {4 * time.Second, 9, false, false}, {8 * time.Second, 13, false, false}, {20 * time.Second, 25, false, false}}},
		{"unchanged lease is orphaned after LeaseOrphanAfter", []obs{{0, 5, false, false}, {9 * time.Second, 5, false, false}, {LeaseOrphanAfter, 5, false, true}}},
		{"absent lease counts as unchanged", []obs{{0, 0, false, false}, {LeaseOrphanAfter, 0, false, true}}},
		{"a claim restarts the clock", []obs{{0, 5, false, false}, {9 * time.Second, 7, false, false}, {LeaseOrphanAfter + time.Second, 7, false, false}}},
		{"an ended turn is not orphaned", []obs{{0, 5, false, false}, {time.Minute, 5, true, false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c OrphanCheck
			for i, o := range tc.obs {
				if got := c.Observe(o.rev, o.terminal, t0.Add(o.at)); got != o.want {
					t.Fatalf("observation %d: orphaned=%v, want %v", i, got, o.want)
				}
			}
		})
	}
}

func TestInternalEvents(t *testing.T) {
	for _, e := range []string{EventStart, EventPath, EventCheckpointStep, EventCheckpointExec} {
		if !IsInternalEvent(e) {
			t.Errorf("%s is not internal", e)
		}
	}
	for _, e := range []string{EventToken, EventStep, EventDone, EventError, EventApprovalRequired} {
		if IsInternalEvent(e) {
			t.Errorf("%s is internal", e)
		}
	}
}
