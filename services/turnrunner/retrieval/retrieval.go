package retrieval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/chatstream"
)

// Defaults of a run and of Config.
const (
	// DefaultPersona is the persona of a request that names none.
	DefaultPersona = "general-purpose"
	// DefaultMaxSteps and DefaultMaxRetrievalsPerStep apply when the
	// request leaves them at 0 (reference §5.4).
	DefaultMaxSteps             = 5
	DefaultMaxRetrievalsPerStep = 8
	// DefaultStepsCap and DefaultRetrievalsCap bound what a request may ask.
	DefaultStepsCap      = 20
	DefaultRetrievalsCap = 32
	// DefaultSearchLimit is the passages asked of one retrieval.
	DefaultSearchLimit = 8
)

// Token caps of one model call (reference §5.4).
const (
	maxTokensQwen    = 16384
	maxTokensDefault = 4096
)

// ToolName is the one tool a run offers the model.
const ToolName = "retrieve"

// Searcher finds passages relevant to a query in a workspace ("" is the
// personal workspace), best first, at most limit.
type Searcher interface {
	Search(ctx context.Context, workspace, query string, limit int) ([]Passage, error)
}

// Emitter delivers one event of the run to its client. An error means the
// stream is gone: the run stops (and still tries to emit done).
type Emitter interface {
	Emit(event string, data any) error
}

// Config configures a Runner. Zero fields take the documented defaults.
type Config struct {
	// Model is the model server (chatstream.Model's defaults).
	chatstream.Model
	// Prices override agent.DefaultPrices when costing a run.
	Prices map[string]agent.Price
	// SearchLimit is the passages asked of one retrieval; default 8.
	SearchLimit int
	// StepsCap and RetrievalsCap bound a request's maxSteps and
	// maxRetrievalsPerStep (larger values are lowered); defaults 20 and 32.
	StepsCap      int
	RetrievalsCap int
}

func (c Config) withDefaults() Config {
	c.Model = c.Model.WithDefaults()
	if c.SearchLimit == 0 {
		c.SearchLimit = DefaultSearchLimit
	}
	if c.StepsCap == 0 {
		c.StepsCap = DefaultStepsCap
	}
	if c.RetrievalsCap == 0 {
		c.RetrievalsCap = DefaultRetrievalsCap
	}
	return c
}

// Validate reports a config that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := c.Model.Validate("retrieval"); err != nil {
		return err
	}
	switch {
	case c.SearchLimit < 1:
		return fmt.Errorf("retrieval: search limit %d < 1", c.SearchLimit)
	case c.StepsCap < 1 || c.RetrievalsCap < 1:
		return fmt.Errorf("retrieval: caps %d/%d must be at least 1", c.StepsCap, c.RetrievalsCap)
	}
	return nil
}

// Runner runs retrieval runs against one model server. It holds no
// per-run state and is safe for concurrent Runs.
type Runner struct {
	cfg    Config
	client *openai.Client
}

// New returns a Runner for cfg; it connects nothing until a run starts.
func New(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Runner{cfg: cfg, client: cfg.Model.Client(nil)}, nil
}

// Run answers req, emitting started, progress events, then finalized or
// error, and always done last — also when ctx is cancelled, which stops the
// model call at once. The events are the run's outcome; the returned error
// only explains a run that ended with an error event (for logs): nil after
// finalized.
func (r *Runner) Run(ctx context.Context, req protocol.AgentRunRequest, search Searcher, emit Emitter) (err error) {
	defer func() {
		if derr := emit.Emit(protocol.AgentRunEventDone, DoneData{OK: true}); derr != nil && err == nil {
			err = fmt.Errorf("retrieval: run %s: emit done: %w", req.TurnID, derr)
		}
	}()
	ru := r.newRun(req, search, emit)
	if err := ru.emit(protocol.AgentRunEventStarted, Started{
		Shape:           ru.shape.startedShape(),
		ShapeRequested:  ru.shape.requested,
		ShapeRecognized: ru.shape.recognized,
		Model:           ru.model,
	}); err != nil {
		return err
	}
	if strings.TrimSpace(req.Question) == "" {
		return ru.fail(errors.New("question is required"), "question is required")
	}
	if search == nil {
		return ru.fail(errors.New("no searcher"), agent.MsgGeneric)
	}
	fin, err := ru.loop(ctx)
	if err != nil {
		var ee *emitError
		switch {
		case errors.As(err, &ee):
			return err // the stream is gone: nobody would read an error event
		case ctx.Err() != nil:
			return ru.fail(fmt.Errorf("retrieval: run %s: %w", req.TurnID, ctx.Err()), MsgCancelled)
		default:
			return ru.fail(fmt.Errorf("retrieval: run %s: %w", req.TurnID, err), agent.FriendlyError(err))
		}
	}
	return ru.emit(protocol.AgentRunEventFinalized, fin)
}

// run is the state of one retrieval run.
type run struct {
	r             *Runner
	req           protocol.AgentRunRequest
	search        Searcher
	emitter       Emitter
	shape         shapeChoice
	model         string
	persona       string
	maxSteps      int
	maxRetrievals int
	start         time.Time
}

func (r *Runner) newRun(req protocol.AgentRunRequest, search Searcher, emit Emitter) *run {
	model := req.Model
	if model == "" {
		model = protocol.DefaultAgentModel
	}
	persona := req.Persona
	if persona == "" {
		persona = DefaultPersona
	}
	return &run{
		r:             r,
		req:           req,
		search:        search,
		emitter:       emit,
		shape:         chooseShape(req.Shape, model),
		model:         model,
		persona:       persona,
		maxSteps:      bound(req.MaxSteps, DefaultMaxSteps, r.cfg.StepsCap),
		maxRetrievals: bound(req.MaxRetrievalsPerStep, DefaultMaxRetrievalsPerStep, r.cfg.RetrievalsCap),
		start:         time.Now(),
	}
}

// bound is v, or def when v is not positive, at most limit.
func bound(v, def, limit int) int {
	if v <= 0 {
		v = def
	}
	return min(v, limit)
}

// emitError marks a failed Emit: the client's stream is gone.
type emitError struct{ err error }

func (e *emitError) Error() string { return "emit: " + e.err.Error() }

func (e *emitError) Unwrap() error { return e.err }

func (ru *run) emit(event string, data any) error {
	if err := ru.emitter.Emit(event, data); err != nil {
		return fmt.Errorf("retrieval: run %s: %w", ru.req.TurnID, &emitError{err})
	}
	return nil
}

// fail emits the error event with message and returns cause.
func (ru *run) fail(cause error, message string) error {
	if err := ru.emit(protocol.AgentRunEventError, ErrorData{Error: message}); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

func (ru *run) progress(p Progress) error { return ru.emit(protocol.AgentRunEventProgress, p) }

// retrieveTool is the tool definition offered on every step.
var retrieveTool = openai.Tool{
	Type: openai.ToolTypeFunction,
	Function: &openai.FunctionDefinition{
		Name: ToolName,
		Description: "Search the user's workspace (saved memories and past conversations) for passages relevant to a query. " +
			"Returns the best-matching passages, numbered, each with a relevance score.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to search for: a few specific words or a short phrase."}},"required":["query"]}`),
	},
}

// loop runs the steps and returns the finalized event's data.
func (ru *run) loop(ctx context.Context) (Finalized, error) {
	fin := Finalized{PromptShapeName: ru.shape.name}
	msgs := []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: systemPrompt(ru.shape.name, ru.persona, ru.maxSteps, ru.maxRetrievals)},
		{Role: openai.ChatMessageRoleUser, Content: ru.req.Question},
	}
	var best string // the last non-empty answer text, for an exhausted loop
	for step := range ru.maxSteps {
		if err := ru.progress(Progress{Type: ProgressStepStarted, StepIndex: step}); err != nil {
			return fin, err
		}
		sr, err := ru.r.call(ctx, ru.model, msgs)
		if err != nil {
			return fin, err
		}
		fin.StepsTaken = step + 1
		fin.TotalTokensIn += sr.Usage.PromptTokens
		fin.TotalTokensOut += sr.Usage.CompletionTokens
		if Normalize(sr.Content) != "" {
			best = sr.Content
		}
		if len(sr.Calls) == 0 {
			if err := ru.stepCompleted(step, sr.Usage); err != nil {
				return fin, err
			}
			fin.RawResponse = sr.Content
			return ru.finish(fin, step, ProgressFinalized, "")
		}
		msgs = append(msgs, assistantMessage(sr))
		for i, c := range sr.Calls {
			text, searched, err := ru.retrieve(ctx, step, i, c)
			if err != nil {
				return fin, err
			}
			if searched {
				fin.RetrievalCalls++
			}
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, Content: text, ToolCallID: c.ID})
		}
		if err := ru.stepCompleted(step, sr.Usage); err != nil {
			return fin, err
		}
	}
	fin.RawResponse = best
	fin.LoopExhausted = true
	msg := fmt.Sprintf("step limit (%d) reached before a final answer", ru.maxSteps)
	return ru.finish(fin, ru.maxSteps-1, ProgressLoopExhausted, msg)
}

func (ru *run) stepCompleted(step int, u openai.Usage) error {
	in, out := u.PromptTokens, u.CompletionTokens
	cost := agent.Cost(ru.model, in, out, ru.r.cfg.Prices)
	return ru.progress(Progress{Type: ProgressStepCompleted, StepIndex: step, TokensIn: &in, TokensOut: &out, CostUSD: &cost})
}

// finish completes fin's totals and emits the last progress event.
func (ru *run) finish(fin Finalized, step int, kind, message string) (Finalized, error) {
	fin.NormalizedResponse = Normalize(fin.RawResponse)
	fin.TotalCostUSD = agent.Cost(ru.model, fin.TotalTokensIn, fin.TotalTokensOut, ru.r.cfg.Prices)
	fin.TotalLatencyMs = time.Since(ru.start).Milliseconds()
	p := Progress{Type: kind, StepIndex: step, Message: message}
	if kind == ProgressFinalized {
		p.TokensIn, p.TokensOut, p.CostUSD = &fin.TotalTokensIn, &fin.TotalTokensOut, &fin.TotalCostUSD
	}
	return fin, ru.progress(p)
}

// retrieve answers the i-th tool call of a step with the text the model
// gets back; searched reports whether a search ran. Only a cancelled ctx or
// a gone stream is an error: a bad call or a failed search is told to the
// model, which can try again.
func (ru *run) retrieve(ctx context.Context, step, i int, c *chatstream.ToolCall) (text string, searched bool, err error) {
	if c.Name != ToolName {
		return fmt.Sprintf("Error: unknown tool %q; the only tool is %q.", c.Name, ToolName), false, nil
	}
	if i >= ru.maxRetrievals {
		return fmt.Sprintf("Not run: the limit of %d retrievals per step was reached. Use the results you have, or retrieve again in the next step.", ru.maxRetrievals), false, nil
	}
	var args struct {
		Query any `json:"query"`
	}
	query := ""
	if json.Unmarshal(c.Args, &args) == nil {
		query, _ = args.Query.(string)
	}
	query = strings.TrimSpace(query)
	if query == "" {
		return `Error: retrieve needs a non-empty "query" string.`, false, nil
	}
	passages, serr := ru.search.Search(ctx, ru.req.Workspace, query, ru.r.cfg.SearchLimit)
	if ctx.Err() != nil {
		return "", true, ctx.Err()
	}
	n := len(passages)
	p := Progress{Type: ProgressRetrievalInvoked, StepIndex: step, RetrievalQuery: &query, RetrievalResultsCount: &n}
	text = FormatResults(passages)
	if serr != nil {
		n = 0
		p.Message = "retrieval failed"
		text = "Retrieval failed; no results. Try again or answer from what you have."
	}
	return text, true, ru.progress(p)
}

// stepResult is what one model call produced.
type stepResult = chatstream.Reply

// assistantMessage is a step's reply as it goes back to the model; its
// reasoning (<think> blocks) is left out.
func assistantMessage(sr stepResult) openai.ChatCompletionMessage {
	m := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: Normalize(sr.Content)}
	for _, c := range sr.Calls {
		m.ToolCalls = append(m.ToolCalls, openai.ToolCall{
			ID: c.ID, Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: c.Name, Arguments: string(c.Args)},
		})
	}
	return m
}

// chatRequest is the request of one step (reference §5.4 for the token
// cap and temperature).
func chatRequest(model string, msgs []openai.ChatCompletionMessage) openai.ChatCompletionRequest {
	req := openai.ChatCompletionRequest{
		Model:         model,
		Messages:      msgs,
		Tools:         []openai.Tool{retrieveTool},
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
		MaxTokens:     maxTokensDefault,
		Temperature:   temperature(model),
	}
	if strings.Contains(strings.ToLower(model), "qwen") {
		req.MaxTokens = maxTokensQwen
	}
	if openai.NewReasoningValidator().Validate(req) != nil {
		// go-openai refuses these for its reasoning models; the cap moves
		// to max_completion_tokens and the temperature is left to the model.
		req.MaxCompletionTokens, req.MaxTokens, req.Temperature = req.MaxTokens, 0, 0
	}
	return req
}

// temperature is 1 for Claude Opus models, omitted (0) for the models that
// reject one, else 0.3.
func temperature(model string) float32 {
	switch {
	case strings.HasPrefix(model, "claude-opus"):
		return 1
	case model == "gpt-5.4" || model == "minimax-m27-via-openrouter":
		return 0
	default:
		return 0.3
	}
}

// call makes one streamed model call. ctx cancels the HTTP request.
func (r *Runner) call(ctx context.Context, model string, msgs []openai.ChatCompletionMessage) (stepResult, error) {
	s, err := r.client.CreateChatCompletionStream(ctx, chatRequest(model, msgs))
	if err != nil {
		return stepResult{}, &agent.ModelError{Model: model, Err: err}
	}
	defer s.Close()
	sr, err := chatstream.Read(s, nil)
	if err != nil {
		return stepResult{}, &agent.ModelError{Model: model, Err: err}
	}
	return sr, nil
}
