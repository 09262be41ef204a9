package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/waggle-os/core/libs/protocol"
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
}

// Tool is one capability the model can call. Run gets the turn's Env and the
// model's JSON arguments and returns the text the model sees; a returned
// error means the call failed and its message is shown to the model.
type Tool interface {
	Name() string
	Description() string
	// Schema is a JSON Schema object describing the arguments.
	Schema() json.RawMessage
	Run(ctx context.Context, env Env, input json.RawMessage) (string, error)
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
	builtins = append(builtins, saveMemoryTool{}, searchMemoryTool{}, generateDocxTool{})
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

// Call runs the tool. A panicking tool (a plugin bug) becomes an error for
// this call instead of taking the turn runner down.
func (b Bound) Call(ctx context.Context, input json.RawMessage) (result string, err error) {
	defer func() {
		if p := recover(); p != nil {
			result = ""
			err = fmt.Errorf("internal error in %s: %v", b.tool.Name(), p)
		}
	}()
	return b.tool.Run(ctx, b.env, input)
}
