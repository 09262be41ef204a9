package protocol

// WorkflowPattern is a repeated tool sequence offered as a reusable skill
// (the original's SkillTemplate shape, sent in the workflow_captured
// notification).
type WorkflowPattern struct {
	Name            string   `json:"name"`
	Description     string   `json:"description"`
	TriggerPatterns []string `json:"triggerPatterns"`
	Steps           []string `json:"steps"`
	Tools           []string `json:"tools"`
	Category        string   `json:"category"`
}

// CapturedWorkflow is a stored pattern: when it was found and how often
// its sequence had occurred by then.
type CapturedWorkflow struct {
	WorkflowPattern
	DetectedAt  string `json:"detectedAt"`
	Occurrences int    `json:"occurrences"`
}

// WorkflowObserveRequest is one finished turn's model tool calls, in order.
type WorkflowObserveRequest struct {
	Workspace string   `json:"workspace"`
	Session   string   `json:"session"`
	Tools     []string `json:"tools"`
}

// WorkflowObserveReply carries the pattern the turn completed, when it is
// new to the workspace (nil otherwise).
type WorkflowObserveReply struct {
	Pattern *WorkflowPattern `json:"pattern,omitempty"`
}

// WorkflowList is a workspace's captured patterns.
type WorkflowList struct {
	Workflows []CapturedWorkflow `json:"workflows"`
}
