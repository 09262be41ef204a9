package retrieval

// Progress types (the progress event's "type").
const (
	ProgressStepStarted      = "step_started"
	ProgressRetrievalInvoked = "retrieval_invoked"
	ProgressStepCompleted    = "step_completed"
	ProgressFinalized        = "finalized"
	ProgressLoopExhausted    = "loop_exhausted"
)

// MsgCancelled is the error event's text when the run's context ended.
const MsgCancelled = "agent run cancelled"

// Started is the data of the started event.
type Started struct {
	// Shape is the requested shape when recognised, else ModelDefaultShape.
	Shape string `json:"shape"`
	// ShapeRequested is the request's shape, null when it named none.
	ShapeRequested *string `json:"shapeRequested"`
	// ShapeRecognized is true when the request named a known shape or none.
	ShapeRecognized bool   `json:"shapeRecognized"`
	Model           string `json:"model"`
}

// Progress is the data of a progress event. Only the keys that apply to
// its Type are present:
//   - step_started: step_index
//   - retrieval_invoked: step_index, retrieval_query, retrieval_results_count
//     (and message when the search failed)
//   - step_completed: step_index, tokens_in, tokens_out, cost_usd (the step's)
//   - finalized: step_index, tokens_in, tokens_out, cost_usd (the run's)
//   - loop_exhausted: step_index, message
type Progress struct {
	Type                  string   `json:"type"`
	StepIndex             int      `json:"step_index"`
	RetrievalQuery        *string  `json:"retrieval_query,omitempty"`
	RetrievalResultsCount *int     `json:"retrieval_results_count,omitempty"`
	TokensIn              *int     `json:"tokens_in,omitempty"`
	TokensOut             *int     `json:"tokens_out,omitempty"`
	CostUSD               *float64 `json:"cost_usd,omitempty"`
	Message               string   `json:"message,omitempty"`
}

// Finalized is the data of the finalized event.
type Finalized struct {
	// RawResponse is the final answer as the model wrote it.
	RawResponse string `json:"rawResponse"`
	// NormalizedResponse is RawResponse through Normalize.
	NormalizedResponse string `json:"normalizedResponse"`
	// PromptShapeName is the shape the run used (never ModelDefaultShape).
	PromptShapeName string  `json:"promptShapeName"`
	StepsTaken      int     `json:"stepsTaken"`
	RetrievalCalls  int     `json:"retrievalCalls"`
	LoopExhausted   bool    `json:"loopExhausted"`
	TotalTokensIn   int     `json:"totalTokensIn"`
	TotalTokensOut  int     `json:"totalTokensOut"`
	TotalCostUSD    float64 `json:"totalCostUsd"`
	TotalLatencyMs  int64   `json:"totalLatencyMs"`
}

// ErrorData is the data of the error event.
type ErrorData struct {
	Error string `json:"error"`
}

// DoneData is the data of the done event, always last.
type DoneData struct {
	OK bool `json:"ok"`
}
