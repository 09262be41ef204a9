package protocol

import "testing"

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
