package gate

// Step texts a turn emits for the gate's outcomes, and the texts the model
// reads in place of a result when a call was not allowed to run.

// StepAutoApproved is shown when the autonomy level waived an approval.
func StepAutoApproved(tool, level string) string {
	return "⚡ " + tool + " auto-approved (" + level + ")"
}

// StepTestMode is shown when approvals are switched off for tests
// (WAGGLE_AUTO_APPROVE).
func StepTestMode(tool string) string { return "✔ " + tool + " auto-approved (test mode)" }

// StepGrant is shown when a saved "always allow" grant covered the call.
func StepGrant(tool string) string { return "✔ " + tool + " allowed by saved grant" }

// StepApproved is shown when the user approved the call.
func StepApproved(tool string) string { return "✔ " + tool + " approved" }

// StepDenied is shown when the user denied the call.
func StepDenied(tool string) string { return "✖ " + tool + " denied by user" }

// StepTimedOut is shown when nobody answered the approval in time. It is
// worded apart from StepDenied so a timeout is never mistaken for the
// user's choice.
func StepTimedOut(tool string) string { return "⏱ " + tool + " approval timed out — denied" }

// ModelTextDenied is what the model reads instead of a result when the user
// denied the call.
func ModelTextDenied(tool string) string { return "[BLOCKED] User denied " + tool }

// ModelTextTimedOut is what the model reads instead of a result when the
// approval timed out, so it does not tell the user they said no.
func ModelTextTimedOut(tool string) string { return "[BLOCKED] Approval for " + tool + " timed out" }
