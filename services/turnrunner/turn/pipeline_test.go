package turn

import (
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

func TestHasUserMessage(t *testing.T) {
	if hasUserMessage(nil) || hasUserMessage([]protocol.Message{{Role: protocol.RoleAssistant}}) ||
		!hasUserMessage([]protocol.Message{{Role: protocol.RoleAssistant}, {Role: protocol.RoleUser}}) {
		t.Error("hasUserMessage")
	}
}
