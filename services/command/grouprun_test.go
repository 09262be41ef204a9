package command

import (
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

func TestPlanSteps(t *testing.T) {
	m := func(id, role string, order int) protocol.AgentGroupMember {
		return protocol.AgentGroupMember{AgentID: id, RoleInGroup: role, ExecutionOrder: order}
	}
	tests := []struct {
		name     string
		strategy string
		members  []protocol.AgentGroupMember
		want     string
	}{
		{"sequential by order, ties stable", "sequential", []protocol.AgentGroupMember{m("c", "worker", 2), m("a", "worker", 1), m("b", "worker", 1)}, "a,b,c"},
		{"parallel", "parallel", []protocol.AgentGroupMember{m("x", "worker", 0), m("y", "worker", 0)}, "x,y"},
		{"coordinator with lead", "coordinator", []protocol.AgentGroupMember{m("w", "worker", 1), m("L", "Lead", 9), m("v", "worker", 0)}, "L:plan,v:work,w:work,L:combine"},
		{"coordinator without lead uses first", "coordinator", []protocol.AgentGroupMember{m("w", "worker", 1), m("v", "worker", 0)}, "v:plan,w:work,v:combine"},
		{"coordinator lone lead", "coordinator", []protocol.AgentGroupMember{m("L", "lead", 0)}, "L:plan,L:combine"},
		{"no members", "parallel", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps := planSteps("job-1", protocol.AgentGroup{Strategy: tt.strategy, Members: tt.members})
			var got []string
			for i, s := range steps {
				name := s.AgentID
				if s.Phase != "" {
					name += ":" + s.Phase
				}
				got = append(got, name)
				if s.Status != protocol.StepPending || !protocol.ValidID(s.Session) || !strings.HasSuffix(s.Session, "-"+string(rune('1'+i))) {
					t.Errorf("step %d = %+v", i, s)
				}
			}
			if steps == nil || strings.Join(got, ",") != tt.want {
				t.Fatalf("steps %v, want %s", got, tt.want)
			}
		})
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 4, "abcd\n[…truncated]"},
		{"aé", 2, "a\n[…truncated]"}, // never splits a UTF-8 sequence
	}
	for _, tt := range tests {
		if got := clip(tt.in, tt.limit); got != tt.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
		}
	}
}
