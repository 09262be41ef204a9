package rules

import "github.com/waggle-os/core/libs/protocol"

// Step texts a turn emits for the gate's outcomes, and the texts the model
// reads in place of a result when a call was not allowed to run. The turn
// runner emits some of them itself, so the wording lives in libs/protocol;
// these names keep the gate's vocabulary in one place for the service.

// StepAutoApproved is shown when the autonomy level waived an approval.
func StepAutoApproved(tool, level string) string {
	return protocol.ApprovalStepAutoApproved(tool, level)
}

// StepTestMode is shown when approvals are switched off for tests
// (WAGGLE_AUTO_APPROVE).
func StepTestMode(tool string) string { return "✔ " + tool + " auto-approved (test mode)" }

// StepGrant is shown when a saved "always allow" grant covered the call.
func StepGrant(tool string) string { return protocol.ApprovalStepGrant(tool) }

// StepApproved is shown when the user approved the call.
func StepApproved(tool string) string { return protocol.ApprovalStepApproved(tool) }

// StepDenied is shown when the user denied the call.
func StepDenied(tool string) string { return protocol.ApprovalStepDenied(tool) }

// StepTimedOut is shown when nobody answered the approval in time.
func StepTimedOut(tool string) string { return protocol.ApprovalStepTimedOut(tool) }

// ModelTextDenied is what the model reads instead of a result when the user
// denied the call.
func ModelTextDenied(tool string) string { return protocol.ApprovalModelDenied(tool) }

// ModelTextTimedOut is what the model reads instead of a result when the
// approval timed out.
func ModelTextTimedOut(tool string) string { return protocol.ApprovalModelTimedOut(tool) }
