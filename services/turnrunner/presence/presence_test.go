package presence

import (
	"testing"
	"time"
)

func TestPresence(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type op struct {
		at     float64
		kind   string // attach, detach, tick
		client string
	}
	tests := []struct {
		name    string
		grace   time.Duration
		ops     []op
		firedAt float64 // -1: never
	}{
		{"no grace: last detach cancels at once", 0,
			[]op{{0, "attach", "a"}, {1, "detach", "a"}}, 1},
		{"no grace: a second tab keeps the turn", 0,
			[]op{{0, "attach", "a"}, {0, "attach", "b"}, {1, "detach", "a"}, {2, "tick", ""}}, -1},
		{"grace: back in time", 30 * time.Second,
			[]op{{0, "attach", "a"}, {1, "detach", "a"}, {20, "tick", ""}, {25, "attach", "b"}, {60, "tick", ""}}, -1},
		{"grace: runs out", 30 * time.Second,
			[]op{{0, "attach", "a"}, {1, "detach", "a"}, {20, "tick", ""}, {31, "tick", ""}, {40, "tick", ""}}, 31},
		{"silent follower (its gateway died) counts from its last attach", 5 * time.Second,
			[]op{{0, "attach", "a"}, {5, "attach", "a"}, {14, "tick", ""}, {16, "tick", ""}, {19, "tick", ""}, {20, "tick", ""}}, 20},
		{"attach heartbeats keep it alive", 0,
			[]op{{0, "attach", "a"}, {5, "attach", "a"}, {10, "attach", "a"}, {14, "tick", ""}, {15, "attach", "a"}, {24, "tick", ""}}, -1},
		{"never followed: never cancelled", 0,
			[]op{{0, "tick", ""}, {100, "tick", ""}, {101, "detach", "x"}}, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fired := -1.0
			var now float64
			p := New(tc.grace, func() {
				if fired >= 0 {
					t.Fatal("cancelled twice")
				}
				fired = now
			})
			for _, o := range tc.ops {
				now = o.at
				switch o.kind {
				case "attach":
					p.Attach(o.client, at(o.at))
				case "detach":
					p.Detach(o.client, at(o.at))
				case "tick":
					p.Tick(at(o.at))
				}
			}
			if fired != tc.firedAt {
				t.Fatalf("cancelled at %v, want %v", fired, tc.firedAt)
			}
		})
	}
}
