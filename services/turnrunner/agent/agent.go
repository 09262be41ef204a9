// Package agent is the agent loop of a chat turn: it streams the model's
// reply (go-openai against an OpenAI-compatible server), runs the tool
// calls the model asks for through an approval gate, feeds the results back
// and repeats until the model answers without tools, emitting the turn's
// SSE events (token, step, tool, tool_result, file_created, model_switch)
// to a Sink as they happen.
//
// Where this deliberately differs from the original:
//   - Retry notices ("[Rate limited — waiting …]", "[Server error …]") are
//     step events, not tokens, so they never end up in the reply text the
//     user keeps or the model sees next turn (and carry no surrounding
//     newlines, which only separated them from reply text).
//   - A model switch is announced (model_switch + step) when it happens —
//     the budget switch before the first model call, the fallback when the
//     primary model gave up — rather than after the run.
//   - Result.Content is all text the model streamed in the turn (every
//     step), which is exactly what the client concatenated from tokens.
//   - FriendlyError never forwards a raw error text.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/chatstream"
)

// Defaults of Config.
const (
	DefaultMaxSteps      = 200
	DefaultMaxRetries    = 3
	DefaultRetryBackoff  = time.Second
	DefaultMaxRetryAfter = 30 * time.Second
)

// Config configures an Agent. Zero fields take the documented defaults.
type Config struct {
	// Model is the model server (chatstream.Model's defaults). Its
	// HTTPClient's Transport is wrapped; a response-header timeout is
	// retried.
	chatstream.Model
	// MaxSteps bounds the model calls of one turn; default 25.
	MaxSteps int
	// MaxRetries is how often a failing model call is retried before the
	// fallback model is tried; default 3.
	MaxRetries int
	// RetryBackoff is the first retry's wait, doubled on each further
	// retry; default 1s.
	RetryBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After header honoured; a longer
	// one falls back to RetryBackoff; default 30s.
	MaxRetryAfter time.Duration
}

func (c Config) withDefaults() Config {
	c.Model = c.Model.WithDefaults()
	if c.MaxSteps == 0 {
		c.MaxSteps = DefaultMaxSteps
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.MaxRetryAfter == 0 {
		c.MaxRetryAfter = DefaultMaxRetryAfter
	}
	return c
}

// Validate reports a config that cannot work (after defaults are applied).
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := c.Model.Validate("agent"); err != nil {
		return err
	}
	switch {
	case c.MaxSteps < 1:
		return fmt.Errorf("agent: max steps %d < 1", c.MaxSteps)
	case c.MaxRetries < 0:
		return fmt.Errorf("agent: max retries %d < 0", c.MaxRetries)
	case c.RetryBackoff < 0 || c.MaxRetryAfter < 0:
		return errors.New("agent: negative duration in config")
	}
	return nil
}

// Agent runs agent-loop turns against one model server. It holds no
// per-turn state and is safe for concurrent Runs.
type Agent struct {
	cfg    Config
	client *openai.Client
	pools  keyPools
	cache  summaryCache
}

// New returns an Agent for cfg; it connects nothing until a turn runs.
func New(cfg Config) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	client := cfg.Model.Client(func(base http.RoundTripper) http.RoundTripper { return &metaTransport{base: base} })
	return &Agent{cfg: cfg, client: client}, nil
}

// Request is one turn for the agent loop.
type Request struct {
	// TurnID tags the tool events of this turn.
	TurnID string
	// Model is the resolved model (see ResolveModel).
	Model ModelChoice
	// Prices override DefaultPrices for the cost (config.json prices).
	Prices map[string]Price
	// SystemPrompt is sent first; empty sends none. Recalled memories are
	// appended to it, unless BuildPrompt is set.
	SystemPrompt string
	// BuildPrompt, when set, builds the system prompt instead, once the
	// auto-recall and GEPA have run: recalled are the memories kept,
	// expanded says GEPA rewrote the message.
	BuildPrompt func(recalled []protocol.MemoryFrame, expanded bool) string
	// History is the session's earlier messages, oldest first, without the
	// current message; HistoryTools are their tool events.
	History      []protocol.Message
	HistoryTools []protocol.ToolEvent
	// Message is the user's message of this turn.
	Message string
	// Tools the model may call.
	Tools []Tool
	// Gate decides whether a call may run; nil allows every call.
	Gate Gate
	// Recall finds memories for the system prompt; nil skips auto-recall.
	Recall Recall
	// Sink receives the turn's events; required.
	Sink Sink
	// OnToolEvent, when set, is called once per finished or denied tool
	// call (and the auto-recall), as it happens, so it can be persisted. It
	// is called before the call's tool_result event is emitted: a client
	// never sees a result that was not handed over for persistence.
	OnToolEvent func(protocol.ToolEvent)
	// Checkpoint, when set, is told of every step with tool calls and of
	// every call about to run, before they happen.
	Checkpoint Checkpointer
	// Resume, when set, continues a turn another runner started.
	Resume *Resume
	// APIKeys is the credential pool (config.json apiKeys), used in order
	// and rotated on 401/429; empty uses Config.APIKey.
	APIKeys []string
	// Expand, when set, lets GEPA expand a vague first message (see
	// IsVague); the runner leaves it nil for later messages, slash
	// commands and reroutes.
	Expand *ExpandOptions
	// Compress, when set, summarises older messages with a model instead of
	// dropping them (config.json budgetModel); nil uses the sliding window.
	Compress *CompressOptions
	// Log receives what the turn survives but an operator should know
	// (a failed summary call); nil discards it.
	Log *slog.Logger
	// Blocked are tools a policy removed (they must not be in Tools): a call
	// to one anyway is denied with protocol.GovernanceBlockedText, shown as
	// its tool_result.
	Blocked []string
	// MaxSteps, when positive and below Config.MaxSteps, bounds this run's
	// model calls instead (a sub-agent's own, smaller limit).
	MaxSteps int
}

// Run runs one turn. On success it returns the result, which the caller
// persists and announces with DoneData. On a model failure it returns the
// partial result with a *ModelError (show FriendlyError); when ctx is
// cancelled it stops the model stream at once and returns the partial
// result with ctx.Err().
func (a *Agent) Run(ctx context.Context, req Request) (Result, error) {
	if req.Sink == nil {
		return Result{}, errors.New("agent: run: nil sink")
	}
	r := newRun(a, req)
	err := r.loop(ctx)
	r.res.Content = r.content.String()
	r.res.Model = r.model
	r.res.Cost = Cost(r.model, r.res.Usage.InputTokens, r.res.Usage.OutputTokens, req.Prices)
	return r.res, err
}

// run is the state of one turn.
type run struct {
	a        *Agent
	req      Request
	model    string
	fellBack bool
	content  strings.Builder
	res      Result
	tools    map[string]Tool
	names    []string
	oaTools  []openai.Tool
	starts   map[string][]time.Time
	repeats  map[string]int
	blocked  map[string]bool
	// steps counts the model steps that asked for tools (checkpointed).
	steps int
	// pool and key are the credential pool and the index of the key in use
	// (pool nil: Config.APIKey).
	pool *keyPool
	key  int
}

func newRun(a *Agent, req Request) *run {
	r := &run{
		a:       a,
		req:     req,
		model:   firstNonEmpty(req.Model.Model, req.Model.Primary, DefaultModel),
		tools:   map[string]Tool{},
		starts:  map[string][]time.Time{},
		repeats: map[string]int{},
		blocked: map[string]bool{},
	}
	for _, name := range req.Blocked {
		r.blocked[name] = true
	}
	if len(req.APIKeys) > 0 {
		r.pool = a.pools.get(req.APIKeys)
		r.key = r.pool.pick(time.Now())
	}
	for _, t := range req.Tools {
		name := t.Name()
		if _, dup := r.tools[name]; dup {
			continue
		}
		r.tools[name] = t
		r.names = append(r.names, name)
		schema := t.Schema()
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		r.oaTools = append(r.oaTools, openai.Tool{
			Type:     openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{Name: name, Description: t.Description(), Parameters: schema},
		})
	}
	return r
}

// maxSteps is the run's step limit: the request's when it is smaller.
func (r *run) maxSteps() int {
	if n := r.req.MaxSteps; n > 0 && n < r.a.cfg.MaxSteps {
		return n
	}
	return r.a.cfg.MaxSteps
}

func (r *run) logger() *slog.Logger {
	if r.req.Log == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return r.req.Log
}

func (r *run) emit(event string, data any) { r.req.Sink.Emit(event, data) }

func (r *run) step(text string) { emitText(r.req.Sink, protocol.EventStep, text) }

func (r *run) announceSwitch(reason string) {
	r.emit(protocol.EventModelSwitch, ModelSwitchData{Model: r.model, Reason: reason, Primary: r.primary()})
	r.step("⬡ Switched to " + r.model + " — " + reason)
}

func (r *run) primary() string { return firstNonEmpty(r.req.Model.Primary, r.model) }

func (r *run) loop(ctx context.Context) error {
	resuming := r.req.Resume != nil
	if r.req.Model.SwitchReason != "" && !resuming {
		r.announceSwitch(r.req.Model.SwitchReason)
	}
	var recalled []protocol.MemoryFrame
	if r.req.Recall != nil {
		if resuming {
			// The client saw the recall already (or the turn had not got
			// that far); searching again is harmless, showing it is not.
			recalled = r.quietRecall(ctx)
		} else {
			var err error
			if recalled, err = r.recall(ctx); err != nil {
				return err
			}
		}
	}
	var expanded string
	if !resuming {
		expanded = r.expand(ctx)
	}
	system := joinNonEmpty(r.req.SystemPrompt, memorySection(recalled))
	if r.req.BuildPrompt != nil {
		// A resumed turn did not run GEPA again: it counts as expanded, so
		// its prompt gains no ambiguity guard its first half never had.
		system = r.req.BuildPrompt(recalled, expanded != "" || resuming)
	}
	history := make([]protocol.Message, 0, len(r.req.History)+1)
	history = append(history, r.req.History...)
	history = append(history, protocol.Message{Role: protocol.RoleUser, Content: r.req.Message, TurnID: r.req.TurnID})
	window, histTools := history, r.req.HistoryTools
	if r.req.Compress != nil {
		window, histTools = r.compressContext(ctx, history, histTools, resuming)
	} else {
		window = ApplyContextWindow(history, MaxContextMessages)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if expanded != "" {
		// Only the model sees the expansion; the session keeps the original.
		window = append(window[:len(window)-1:len(window)-1], protocol.Message{Role: protocol.RoleUser, Content: expanded, TurnID: r.req.TurnID})
	}
	msgs := BuildMessages(system, window, histTools)
	if resuming {
		more, err := r.resume(ctx)
		if err != nil {
			return err
		}
		msgs = append(msgs, more...)
	}

	for step := r.steps + 1; ; step++ {
		sr, err := r.callModel(ctx, msgs)
		r.content.WriteString(sr.Content)
		r.res.Usage.InputTokens += sr.Usage.PromptTokens
		r.res.Usage.OutputTokens += sr.Usage.CompletionTokens
		if err != nil {
			return err
		}
		if len(sr.Calls) == 0 {
			return nil
		}
		if err := r.checkpointStep(ctx, sr); err != nil {
			return err
		}
		toolMsgs, err := r.runTools(ctx, sr)
		if err != nil {
			return err
		}
		msgs = append(msgs, toolMsgs...)
		if limit := r.maxSteps(); step >= limit {
			r.step(fmt.Sprintf("Reached the limit of %d steps — stopping here.", limit))
			return nil
		}
	}
}

// checkpointStep numbers a step with tool calls and makes it durable
// before any of its tools runs.
func (r *run) checkpointStep(ctx context.Context, sr stepResult) error {
	r.steps++
	if r.req.Checkpoint == nil {
		return nil
	}
	cp := protocol.StepCheckpoint{
		Step: r.steps, Model: r.model, Content: sr.Content,
		InputTokens: r.res.Usage.InputTokens, OutputTokens: r.res.Usage.OutputTokens,
	}
	for _, pc := range sr.Calls {
		cp.Calls = append(cp.Calls, protocol.CheckpointCall{ID: pc.ID, Name: pc.Name, Args: string(pc.Args)})
	}
	if err := r.req.Checkpoint.Step(ctx, cp); err != nil {
		return fmt.Errorf("agent: checkpoint step %d: %w", r.steps, err)
	}
	return nil
}

// callModel runs one model step, retrying retryable failures that happened
// before any text was streamed, then falling back to the fallback model once.
func (r *run) callModel(ctx context.Context, msgs []openai.ChatCompletionMessage) (stepResult, error) {
	retries := 0
	for {
		sr, err := r.a.stream(r.keyed(ctx), r.model, msgs, r.oaTools, r.req.Sink)
		if err == nil {
			return sr, nil
		}
		if ctx.Err() != nil {
			return sr, ctx.Err()
		}
		if !sr.Streamed && r.rotateKey(err) {
			r.step(RotatedKeyText)
			continue
		}
		if sr.Streamed || !retryable(err) {
			return sr, r.modelError(err)
		}
		if retries < r.a.cfg.MaxRetries {
			retries++
			wait := r.a.backoff(retries, sr.retryAfter)
			secs := strconv.FormatFloat(wait.Seconds(), 'f', -1, 64)
			if statusOf(err) == http.StatusTooManyRequests {
				r.step(fmt.Sprintf("[Rate limited — waiting %ss (retry %d/%d)...]", secs, retries, r.a.cfg.MaxRetries))
			} else {
				r.step(fmt.Sprintf("[Server error %s — retrying in %ss (retry %d/%d)...]", failureLabel(err), secs, retries, r.a.cfg.MaxRetries))
			}
			if err := sleep(ctx, wait); err != nil {
				return stepResult{}, err
			}
			continue
		}
		if fb := r.req.Model.Fallback; fb != "" && fb != r.model && !r.fellBack {
			reason := fmt.Sprintf("%s failed (%s)", r.model, failureLabel(err))
			r.fellBack, r.model, retries = true, fb, 0
			r.announceSwitch(reason)
			continue
		}
		return sr, r.modelError(err)
	}
}

// keyed carries the key in use to the transport.
func (r *run) keyed(ctx context.Context) context.Context {
	if r.pool == nil {
		return ctx
	}
	return withAPIKey(ctx, r.pool.keys[r.key])
}

// rotateKey moves to the pool's next usable key after a 401/429.
func (r *run) rotateKey(err error) bool {
	if r.pool == nil {
		return false
	}
	next, ok := r.pool.fail(r.key, statusOf(err), time.Now())
	if ok {
		r.key = next
	}
	return ok
}

func (r *run) modelError(err error) *ModelError {
	me := &ModelError{Model: r.model, Err: err, secrets: r.req.APIKeys}
	if r.a.cfg.APIKey != "" {
		me.secrets = append(append([]string(nil), r.req.APIKeys...), r.a.cfg.APIKey)
	}
	return me
}

// backoff is the wait before retry n (1-based): a small Retry-After when
// the server sent one, else RetryBackoff doubled per retry.
func (a *Agent) backoff(n int, retryAfter string) time.Duration {
	if d, ok := parseRetryAfter(retryAfter, time.Now()); ok && d <= a.cfg.MaxRetryAfter {
		return d
	}
	return a.cfg.RetryBackoff << (n - 1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	default:
		return a + "\n\n" + b
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
