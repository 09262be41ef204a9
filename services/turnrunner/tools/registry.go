package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/tools/pdftext"
)

// Memory stores and recalls a workspace's memories. The turn runner
// implements it over the bus (session store).
type Memory interface {
	Save(ctx context.Context, workspace, content string, tags []string) (id string, err error)
	Search(ctx context.Context, workspace, query string, limit int) ([]protocol.Memory, error)
}

// Env is what one turn's tools work on.
type Env struct {
	// FilesDir is the absolute directory every file tool (and bash's working
	// directory) is confined to. It is created on first use.
	FilesDir string
	// Workspace is the workspace id memories are saved to and searched in.
	Workspace string
	// Memory backs save_memory and search_memory; nil hides them.
	Memory Memory
	// WebSearch is config.json's web search provider, read for this turn;
	// without a usable one web_search is not offered.
	WebSearch WebSearchConfig
	// Plan is the session's plan, rebuilt for this turn (ReplayPlan); nil
	// hides the plan tools.
	Plan *Plan
	// Knowledge backs query_knowledge and correct_knowledge; nil hides
	// them.
	Knowledge Knowledge
	// Mind backs get_identity, get_awareness and add_task; nil hides them.
	Mind Mind
	// SubAgents backs spawn_agent; nil (a sub-agent's own env) hides it.
	SubAgents SubAgents
}

// Tool is one capability the model can call. Decode turns the model's JSON
// arguments into a Call, once and strictly (see decode): the Call's Input
// is the canonical JSON of the decoded value, and Call.Run runs exactly that
// value. An error from Decode means the arguments are not acceptable; the
// call is refused before anyone is asked to approve it.
type Tool interface {
	Name() string
	Description() string
	// Schema is a JSON Schema object describing the arguments.
	Schema() json.RawMessage
	Decode(input json.RawMessage) (Call, error)
}

// Call is one tool call with its arguments decoded and checked.
type Call struct {
	// Input is the canonical JSON of the decoded arguments: what approval
	// shows and grants match, and exactly what Run executes.
	Input json.RawMessage
	run   func(ctx context.Context, env Env) (string, error)
}

// Run executes the call in env and returns the text the model sees; a
// returned error means the call failed and its message is shown to the
// model.
func (c Call) Run(ctx context.Context, env Env) (string, error) {
	if c.run == nil {
		return "", errors.New("no call to run")
	}
	return c.run(ctx, env)
}

// validator is implemented by tool inputs with rules beyond their types
// (a required field, a positive number); decodeCall applies it so a call
// that cannot run is refused before approval.
type validator interface {
	validate() error
}

// decodeCall decodes input strictly into a new In, validates it and binds
// it to run. The canonical Input is In re-encoded, so what approval sees
// is the very value run gets.
func decodeCall[In any](input json.RawMessage, run func(ctx context.Context, env Env, in *In) (string, error)) (Call, error) {
	in := new(In)
	if err := decode(input, in); err != nil {
		return Call{}, err
	}
	if v, ok := any(in).(validator); ok {
		if err := v.validate(); err != nil {
			return Call{}, err
		}
	}
	canonical, err := json.Marshal(in)
	if err != nil {
		return Call{}, err
	}
	return Call{Input: canonical, run: func(ctx context.Context, env Env) (string, error) {
		return run(ctx, env, in)
	}}, nil
}

// Availability is optionally implemented by a Tool that only makes sense in
// some environments (the memory tools need Env.Memory); Bind leaves it out
// when Available reports false.
type Availability interface {
	Available(env Env) bool
}

// Registry holds tools by name in registration order. It is safe for
// concurrent use.
type Registry struct {
	mu    sync.RWMutex
	byKey map[string]Tool
	order []string
}

// NewRegistry returns a registry holding every built-in tool, configured by
// cfg (zero fields take their defaults); bash is included only when
// cfg.EnableBash is set.
func NewRegistry(cfg Config) *Registry {
	cfg = cfg.withDefaults()
	r := &Registry{byKey: make(map[string]Tool)}
	builtins := []Tool{
		readFileTool{cfg: cfg},
		writeFileTool{},
		editFileTool{},
		listFilesTool{cfg: cfg},
		searchFilesTool{cfg: cfg},
		searchContentTool{cfg: cfg},
	}
	if cfg.EnableBash {
		builtins = append(builtins, bashTool{cfg: cfg})
	}
	builtins = append(builtins, saveMemoryTool{}, searchMemoryTool{}, generateDocxTool{}, webFetchTool{cfg: cfg})
	builtins = append(builtins, gitStatusTool{cfg}, gitDiffTool{cfg}, gitLogTool{cfg}, gitCommitTool{cfg}, gitBranchTool{cfg})
	builtins = append(builtins, webSearchTool{}, readDocumentTool{pdf: pdftext.Config{Timeout: cfg.DocumentTimeout}}, generateXlsxTool{})
	builtins = append(builtins, createPlanTool{}, addPlanStepTool{}, executeStepTool{}, showPlanTool{})
	builtins = append(builtins, queryKnowledgeTool{}, correctKnowledgeTool{})
	builtins = append(builtins, getIdentityTool{}, getAwarenessTool{}, addTaskTool{})
	builtins = append(builtins, spawnAgentTool{})
	for _, t := range builtins {
		if err := r.Register(t); err != nil {
			panic(err) // built-in names are unique; a clash is a programming error
		}
	}
	return r
}

// ErrDuplicateTool is returned by Register for a name already registered.
var ErrDuplicateTool = errors.New("tool name already registered")

// Register adds t. A name that is empty or already taken is an error.
func (r *Registry) Register(t Tool) error {
	if t == nil {
		return errors.New("tools: register: nil tool")
	}
	name := t.Name()
	if name == "" {
		return errors.New("tools: register: empty tool name")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byKey[name]; ok {
		return fmt.Errorf("tools: register %s: %w", name, ErrDuplicateTool)
	}
	r.byKey[name] = t
	r.order = append(r.order, name)
	return nil
}

// Get returns the tool registered under name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byKey[name]
	return t, ok
}

// Names lists the registered tool names in registration order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]string(nil), r.order...)
}

// Bind ties the registered tools to one turn's env, in registration order.
// allow (nil allows all) lets a policy hide tools from the model; tools that
// report themselves unavailable for env are left out too.
func (r *Registry) Bind(env Env, allow func(name string) bool) []Bound {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Bound, 0, len(r.order))
	for _, name := range r.order {
		if allow != nil && !allow(name) {
			continue
		}
		t := r.byKey[name]
		if a, ok := t.(Availability); ok && !a.Available(env) {
			continue
		}
		out = append(out, Bound{tool: t, env: env})
	}
	return out
}

// Bound is a tool tied to one turn's Env. It has the method set the agent
// loop's tool interface asks for.
type Bound struct {
	tool Tool
	env  Env
}

// Name is the tool's name.
func (b Bound) Name() string { return b.tool.Name() }

// Description is the tool's description shown to the model.
func (b Bound) Description() string { return b.tool.Description() }

// Schema is the tool's argument schema.
func (b Bound) Schema() json.RawMessage { return b.tool.Schema() }

// Decode decodes the model's arguments once, strictly (unknown,
// case-variant or duplicate keys and wrong types are errors), and returns
// their canonical JSON and a function that runs exactly that decoded value.
// It is what the agent loop's gate and events see (agent.Decoder).
func (b Bound) Decode(input json.RawMessage) (json.RawMessage, func(context.Context) (string, error), error) {
	c, err := b.decode(input)
	if err != nil {
		return nil, nil, err
	}
	return c.Input, func(ctx context.Context) (string, error) { return b.run(ctx, c) }, nil
}

// Call decodes input and runs the tool (Decode, then the returned run).
func (b Bound) Call(ctx context.Context, input json.RawMessage) (string, error) {
	c, err := b.decode(input)
	if err != nil {
		return "", fmt.Errorf("invalid arguments: %w", err)
	}
	return b.run(ctx, c)
}

// decode is the tool's Decode with a panic (a plugin bug) turned into an
// error.
func (b Bound) decode(input json.RawMessage) (c Call, err error) {
	defer func() {
		if p := recover(); p != nil {
			c, err = Call{}, fmt.Errorf("internal error in %s: %v", b.tool.Name(), p)
		}
	}()
	return b.tool.Decode(input)
}

// run runs c in the bound env. A panicking tool becomes an error for this
// call instead of taking the turn runner down.
func (b Bound) run(ctx context.Context, c Call) (result string, err error) {
	defer func() {
		if p := recover(); p != nil {
			result = ""
			err = fmt.Errorf("internal error in %s: %v", b.tool.Name(), p)
		}
	}()
	return c.Run(ctx, b.env)
}
