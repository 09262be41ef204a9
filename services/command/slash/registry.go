// Package slash provides the slash-command registry and the complete command
// catalogue of Waggle's chat: parsing of "/<name> <args>" input, lookup by
// name or alias, and the exact texts users see.
//
// A command either answers with plain text or asks the agent loop to run a
// prompt on its behalf; the latter results start with
// protocol.RerouteAgentLoopPrefix. What a command may call (memory search,
// workspace state, workflows, …) is passed per execution in an Env, so one
// Registry serves every workspace and session concurrently.
package slash

import (
	"context"
	"fmt"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
)

// Texts shared by several commands and by the callers of this package.
const (
	// NoWorkspaceState is what Env.WorkspaceState returns when the workspace
	// has no state to report.
	NoWorkspaceState = "No workspace state available."
	// NoMemories is what Env.SearchMemory returns when nothing matched.
	NoMemories = "No relevant memories found."
	// MemoryUnavailable is what Env.SearchMemory returns when the search failed.
	MemoryUnavailable = "Memory search unavailable."

	notACommand = "Not a command. Commands start with `/`. Type `/help` to see available commands."
)

// Env is what a command may use while it runs. A nil func means "not
// available in this context"; each command documents its fallback.
type Env struct {
	// Workspace is the effective workspace id (quoted in some reroute prompts).
	Workspace string
	// Session is the session id the command runs for.
	Session string
	// SearchMemory returns formatted search results, or NoMemories /
	// MemoryUnavailable.
	SearchMemory func(ctx context.Context, query string) string
	// WorkspaceState returns the formatted "workspace now" block, or
	// NoWorkspaceState (an empty string counts as none too).
	WorkspaceState func(ctx context.Context) string
	// ListSkills returns the names of the skills loaded for the workspace.
	ListSkills func(ctx context.Context) []string
	// RunWorkflow runs a workflow template by name; its text is the result.
	RunWorkflow func(ctx context.Context, name, task string) (string, error)
	// SpawnAgent runs a sub-agent with a role; its text is the result.
	SpawnAgent func(ctx context.Context, role, task string) (string, error)
	// Marketplace backs /marketplace; nil makes every sub-command answer with
	// its error text.
	Marketplace Marketplace
	// WebSearch reports whether the agent is offered web_search (a search
	// provider is configured); nil reads as no.
	WebSearch func() bool
}

// Info describes a registered command.
type Info struct {
	// Name is the canonical name, without the slash.
	Name string
	// Aliases are the other names the command answers to, without the slash.
	Aliases []string
	// Usage is the one-line usage, with the slash.
	Usage string
	// Description says what the command does, in one line.
	Description string
}

// handlerFunc runs a command with its already trimmed arguments. An error
// (or a panic) becomes "Command `/<name>` failed: <message>".
type handlerFunc func(ctx context.Context, args string, env Env) (string, error)

type command struct {
	name        string
	aliases     []string
	usage       string
	description string
	// helpLabel is the command column of the /help table; empty keeps the
	// command out of the table (only /marketplace, as in the original).
	helpLabel string
	run       handlerFunc
}

// Registry holds the commands. It is immutable once New returns, so Execute
// may be called from any number of goroutines.
type Registry struct {
	commands []*command
	byName   map[string]*command
	byAlias  map[string]*command
}

// New returns a registry holding the whole catalogue (23 commands) in the
// original's registration order: the 22 workflow commands, then marketplace.
func New() *Registry {
	r := &Registry{
		byName:  make(map[string]*command),
		byAlias: make(map[string]*command),
	}
	for _, c := range workflowCommands(r) {
		r.mustRegister(c)
	}
	r.mustRegister(marketplaceCommand())
	return r
}

// mustRegister panics because the catalogue is fixed at compile time: a
// conflict is a programming error that every test run would reveal.
func (r *Registry) mustRegister(c *command) {
	if err := r.register(c); err != nil {
		panic(err)
	}
}

// register adds c, refusing duplicate names and any alias that collides
// with a name or another alias (a collision would make one of them
// unreachable, since aliases are looked up before names).
func (r *Registry) register(c *command) error {
	if _, dup := r.byName[c.name]; dup {
		return fmt.Errorf("slash: register %s: command already registered", c.name)
	}
	if owner, dup := r.byAlias[c.name]; dup {
		return fmt.Errorf("slash: register %s: name conflicts with an alias of %s", c.name, owner.name)
	}
	seen := make(map[string]bool, len(c.aliases))
	for _, a := range c.aliases {
		if owner, dup := r.byAlias[a]; dup {
			return fmt.Errorf("slash: register %s: alias %q conflicts with an alias of %s", c.name, a, owner.name)
		}
		if _, dup := r.byName[a]; dup || a == c.name || seen[a] {
			return fmt.Errorf("slash: register %s: alias %q conflicts with a command name", c.name, a)
		}
		seen[a] = true
	}
	r.commands = append(r.commands, c)
	r.byName[c.name] = c
	for _, a := range c.aliases {
		r.byAlias[a] = c
	}
	return nil
}

// lookup resolves a lower-cased name: aliases first, then names.
func (r *Registry) lookup(name string) *command {
	if c, ok := r.byAlias[name]; ok {
		return c
	}
	return r.byName[name]
}

// IsCommand reports whether input, once trimmed, starts with "/" followed by
// an ASCII word character. So "/ space", "//x" and "/?" are not commands.
func IsCommand(input string) bool {
	t := trim(input)
	return len(t) >= 2 && t[0] == '/' && isWordByte(t[1])
}

// Execute parses and runs one command and returns its text. It never fails:
// non-commands, unknown commands and failing handlers all answer with a
// message meant for the user. The name ends at the first space character
// (U+0020 only: "/research\tx" is the unknown command "research\tx").
func (r *Registry) Execute(ctx context.Context, input string, env Env) string {
	t := trim(input)
	if !IsCommand(t) {
		return notACommand
	}
	rest := t[1:]
	name, args := rest, ""
	if i := strings.IndexByte(rest, ' '); i >= 0 {
		name, args = rest[:i], trim(rest[i+1:])
	}
	c := r.lookup(strings.ToLower(name))
	if c == nil {
		return r.unknownText(name)
	}
	out, err := r.run(ctx, c, args, env)
	if err != nil {
		return fmt.Sprintf("Command `/%s` failed: %s", name, err.Error())
	}
	return out
}

// run isolates a handler so a panic reads to the user like any other
// failure instead of taking down the service.
func (r *Registry) run(ctx context.Context, c *command, args string, env Env) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", p)
			}
		}
	}()
	return c.run(ctx, args, env)
}

func (r *Registry) unknownText(name string) string {
	names := make([]string, len(r.commands))
	for i, c := range r.commands {
		names[i] = "`/" + c.name + "`"
	}
	return fmt.Sprintf("Unknown command `/%s`. Available commands: %s", name, strings.Join(names, ", "))
}

// List returns every command in registration order.
func (r *Registry) List() []Info {
	out := make([]Info, len(r.commands))
	for i, c := range r.commands {
		out[i] = c.info()
	}
	return out
}

// Search returns the commands whose name or an alias contains partial
// (case-insensitive, one leading "/" ignored), in registration order; an
// empty partial returns them all. It serves autocomplete.
func (r *Registry) Search(partial string) []Info {
	needle := strings.ToLower(strings.TrimPrefix(partial, "/"))
	if needle == "" {
		return r.List()
	}
	var out []Info
	for _, c := range r.commands {
		if c.matches(needle) {
			out = append(out, c.info())
		}
	}
	return out
}

func (c *command) matches(needle string) bool {
	if strings.Contains(strings.ToLower(c.name), needle) {
		return true
	}
	for _, a := range c.aliases {
		if strings.Contains(strings.ToLower(a), needle) {
			return true
		}
	}
	return false
}

func (c *command) info() Info {
	return Info{
		Name:        c.name,
		Aliases:     append([]string(nil), c.aliases...),
		Usage:       c.usage,
		Description: c.description,
	}
}

// CommandToken returns the first whitespace-separated token of the trimmed
// input, slash included (as shown in RequiresAIText).
func CommandToken(input string) string {
	fields := strings.FieldsFunc(input, isJSSpace)
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}

// CommandName returns CommandToken without its leading slash, in the case
// the user typed it.
func CommandName(input string) string {
	return strings.TrimPrefix(CommandToken(input), "/")
}

// RequiresAIText is the answer to a command that needs the agent loop when
// no LLM is reachable; cmdToken is CommandToken of the input.
func RequiresAIText(cmdToken string) string {
	return protocol.RequiresAIText(cmdToken)
}

// ProcessingText is the step text shown while a rerouted command runs
// through the agent loop.
func ProcessingText(input string) string {
	return "Processing /" + CommandName(input) + " via AI..."
}

// Reroute reports whether result asks for the agent loop and, if so, returns
// the prompt the loop must run in place of the user's command.
func Reroute(result string) (prompt string, ok bool) {
	return strings.CutPrefix(result, protocol.RerouteAgentLoopPrefix)
}

// reroute builds a result that hands prompt to the agent loop.
func reroute(prompt string) string {
	return protocol.RerouteAgentLoopPrefix + prompt
}

func isWordByte(b byte) bool {
	return b == '_' || ('0' <= b && b <= '9') || ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z')
}

// isJSSpace matches the characters JavaScript's trim() and \s remove, which
// differ from unicode.IsSpace on U+0085 and U+FEFF; parity keeps inputs such
// as a BOM-prefixed command behaving as in the original.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', '\u00a0', '\u1680', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff':
		return true
	}
	return r >= '\u2000' && r <= '\u200a'
}

func trim(s string) string { return strings.TrimFunc(s, isJSSpace) }
