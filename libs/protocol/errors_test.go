package protocol

import (
	"errors"
	"fmt"
	"testing"
)

// Every kind crosses the bus by its wire name and comes back as itself; a
// name this build does not know is Internal, never a caller's fault.
func TestKindWireNames(t *testing.T) {
	seen := map[string]Kind{}
	for k := Internal; k <= StorageFull; k++ {
		name := k.String()
		if prev, dup := seen[name]; dup {
			t.Fatalf("%d and %d share the wire name %q", prev, k, name)
		}
		seen[name] = k
		if got := ParseKind(name); got != k {
			t.Errorf("ParseKind(%q) = %d, want %d", name, got, k)
		}
	}
	for _, name := range []string{"", "404", "NotFound", "not-found"} {
		if got := ParseKind(name); got != Internal {
			t.Errorf("ParseKind(%q) = %s, want internal", name, got)
		}
	}
	if got := Kind(200).String(); got != "internal" {
		t.Errorf("an unknown kind reads %q", got)
	}
}

func TestKindOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Kind
	}{
		{"protocol error", Errorf(NotFound, "Session not found"), NotFound},
		{"wrapped", fmt.Errorf("store: %w", ErrSessionBusy), Conflict},
		{"coded copy keeps its kind", Errorf(Invalid, "x").WithCode("X"), Invalid},
		{"plain error", errors.New("disk on fire"), Internal},
		{"nil", nil, Internal},
	}
	for _, tc := range tests {
		if got := KindOf(tc.err); got != tc.want {
			t.Errorf("%s: KindOf = %s, want %s", tc.name, got, tc.want)
		}
	}
}
