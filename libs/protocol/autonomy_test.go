package protocol

import (
	"testing"
	"time"
)

func TestParseAutonomy(t *testing.T) {
	tests := []struct {
		raw  string
		want Autonomy
	}{
		{`{"level":"yolo"}`, Autonomy{Level: AutonomyYolo}},
		{`{"level":"trusted","expiresAt":1700000000000}`, Autonomy{Level: AutonomyTrusted, ExpiresAt: 1700000000000}},
		{` {"expiresAt":null,"level":"yolo"} `, Autonomy{Level: AutonomyYolo}},
		{`{}`, Autonomy{}},
		// Anything not exactly {level, expiresAt?} is no elevation.
		{`{"LEVEL":"yolo"}`, Autonomy{}},
		{`{"Level":"yolo"}`, Autonomy{}},
		{`{"level":"normal","level":"yolo"}`, Autonomy{}},
		{`{"level":"yolo","scope":"all"}`, Autonomy{}},
		{`{"level":"yolo","expiresAt":"never"}`, Autonomy{}},
		{`{"level":"yolo","expiresAt":1.5e20}`, Autonomy{}},
		{`{"level":"yolo","expiresAt":99999999999999999999}`, Autonomy{}},
		{`{"level":["yolo"]}`, Autonomy{}},
		{`{"level":null}`, Autonomy{}},
		{`"yolo"`, Autonomy{}},
		{`null`, Autonomy{}},
		{`{"level":"yolo"}{"level":"yolo"}`, Autonomy{}},
		{`{"level":"yolo"`, Autonomy{}},
	}
	for _, tc := range tests {
		if got := ParseAutonomy([]byte(tc.raw)); got != tc.want {
			t.Errorf("ParseAutonomy(%s) = %+v, want %+v", tc.raw, got, tc.want)
		}
	}
}

func TestAutonomyCapped(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	tests := []struct {
		a       Autonomy
		max     string
		want    Autonomy
		lowered bool
	}{
		{Autonomy{Level: AutonomyYolo}, AutonomyNormal, Autonomy{Level: AutonomyNormal}, true},
		{Autonomy{Level: AutonomyYolo, ExpiresAt: 2_000_000}, AutonomyTrusted, Autonomy{Level: AutonomyTrusted, ExpiresAt: 2_000_000}, true},
		{Autonomy{Level: AutonomyYolo}, AutonomyYolo, Autonomy{Level: AutonomyYolo}, false},
		{Autonomy{Level: AutonomyTrusted}, AutonomyYolo, Autonomy{Level: AutonomyTrusted}, false},
		{Autonomy{Level: AutonomyNormal}, AutonomyNormal, Autonomy{Level: AutonomyNormal}, false},
		// Expired or unknown levels are already normal: nothing to lower.
		{Autonomy{Level: AutonomyYolo, ExpiresAt: 1}, AutonomyNormal, Autonomy{Level: AutonomyYolo, ExpiresAt: 1}, false},
		{Autonomy{Level: "YOLO"}, AutonomyNormal, Autonomy{Level: "YOLO"}, false},
		// An unknown cap is normal.
		{Autonomy{Level: AutonomyTrusted}, "", Autonomy{Level: AutonomyNormal}, true},
		{Autonomy{Level: AutonomyTrusted}, "root", Autonomy{Level: AutonomyNormal}, true},
	}
	for _, tc := range tests {
		got, lowered := tc.a.Capped(tc.max, now)
		if got != tc.want || lowered != tc.lowered {
			t.Errorf("%+v.Capped(%q) = %+v, %v; want %+v, %v", tc.a, tc.max, got, lowered, tc.want, tc.lowered)
		}
		if got.Effective(now) != tc.want.Effective(now) {
			t.Errorf("effective level of %+v", got)
		}
	}
}

func TestToolPolicyAutonomyCap(t *testing.T) {
	for _, tc := range []struct {
		p    ToolPolicy
		want string
		ok   bool
	}{
		{ToolPolicy{}, "", false},
		{ToolPolicy{Governed: true}, AutonomyNormal, true},
		{ToolPolicy{Governed: true, MaxAutonomy: "bogus"}, AutonomyNormal, true},
		{ToolPolicy{Governed: true, MaxAutonomy: AutonomyYolo}, AutonomyYolo, true},
	} {
		if got, ok := tc.p.AutonomyCap(); got != tc.want || ok != tc.ok {
			t.Errorf("%+v.AutonomyCap() = %q, %v", tc.p, got, ok)
		}
	}
}
