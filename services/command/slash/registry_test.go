package slash

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

// catalogue is the reference's registration order; /help, the unknown
// command text and List all depend on it.
var catalogue = []string{
	"catchup", "now", "research", "draft", "decide", "review", "spawn", "skills", "status", "memory",
	"plan", "focus", "help", "plugins", "export", "import", "settings", "connectors", "cli", "search-all",
	"workflow", "pr", "marketplace",
}

var wantAliases = map[string][]string{
	"catchup":     {"catch-up", "recap"},
	"now":         {"current", "where"},
	"research":    {"investigate"},
	"draft":       {"write"},
	"decide":      {"decision", "weigh"},
	"review":      {"critique", "check"},
	"spawn":       {"agent", "summon"},
	"skills":      {"abilities", "tools"},
	"status":      {"report", "progress"},
	"memory":      {"remember", "recall"},
	"plan":        {"decompose", "break-down"},
	"focus":       {"narrow", "scope"},
	"help":        {"commands", "?"},
	"settings":    {"config", "preferences"},
	"connectors":  {"integrations", "connections"},
	"cli":         {"cli-tools"},
	"search-all":  {"find-all"},
	"workflow":    {"wf"},
	"pr":          {"pull-request", "merge-request"},
	"marketplace": {"mp", "market"},
}

func TestIsCommand(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"/research quantum", true},
		{"/now", true},
		{"  /now  ", true},
		{"/_x", true},
		{"/9", true},
		{"\ufeff/now", true},
		{"hello world", false},
		{"not a /command", false},
		{"/ space", false},
		{"//x", false},
		{"/?", false},
		{"/", false},
		{"", false},
		{"/éclair", false},
	}
	for _, tt := range tests {
		if got := IsCommand(tt.in); got != tt.want {
			t.Errorf("IsCommand(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestExecuteNotACommand(t *testing.T) {
	r := New()
	want := "Not a command. Commands start with `/`. Type `/help` to see available commands."
	for _, in := range []string{"hello", "/ x", "//x", "/?"} {
		if got := r.Execute(context.Background(), in, Env{}); got != want {
			t.Errorf("Execute(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUnknownCommandListsAll23InOrder(t *testing.T) {
	r := New()
	names := make([]string, len(catalogue))
	for i, n := range catalogue {
		names[i] = "`/" + n + "`"
	}
	avail := strings.Join(names, ", ")
	tests := []struct {
		in, typed string
	}{
		{"/nonexistent", "nonexistent"},
		{"/NoSuch thing here", "NoSuch"},
		// Only U+0020 ends the name: a tab keeps the whole text as the name.
		{"/research\tquantum", "research\tquantum"},
		{"/now\nplease", "now\nplease"},
	}
	for _, tt := range tests {
		want := "Unknown command `/" + tt.typed + "`. Available commands: " + avail
		if got := r.Execute(context.Background(), tt.in, Env{}); got != want {
			t.Errorf("Execute(%q) =\n%q\nwant\n%q", tt.in, got, want)
		}
	}
}

// TestEveryNameAndAliasReachable runs each command by name, by every alias
// and in upper case, and expects the same answer each time.
func TestEveryNameAndAliasReachable(t *testing.T) {
	r := New()
	env := Env{
		Workspace:      "ws1",
		WorkspaceState: func(context.Context) string { return "STATE" },
		SearchMemory:   func(_ context.Context, q string) string { return "MEM:" + q },
		ListSkills:     func(context.Context) []string { return []string{"a"} },
	}
	ctx := context.Background()
	list := r.List()
	if len(list) != len(catalogue) {
		t.Fatalf("List() has %d commands, want %d", len(list), len(catalogue))
	}
	for i, info := range list {
		if info.Name != catalogue[i] {
			t.Fatalf("List()[%d].Name = %q, want %q", i, info.Name, catalogue[i])
		}
		if strings.Join(info.Aliases, ",") != strings.Join(wantAliases[info.Name], ",") {
			t.Errorf("%s aliases = %v, want %v", info.Name, info.Aliases, wantAliases[info.Name])
		}
		byName := r.Execute(ctx, "/"+info.Name+" arg", env)
		if strings.HasPrefix(byName, "Unknown command") {
			t.Errorf("/%s is unreachable: %q", info.Name, byName)
		}
		if got := r.Execute(ctx, "/"+strings.ToUpper(info.Name)+" arg", env); got != byName {
			t.Errorf("/%s in upper case = %q, want %q", info.Name, got, byName)
		}
		for _, a := range info.Aliases {
			if a == "?" {
				continue // documented: "/?" fails IsCommand
			}
			if got := r.Execute(ctx, "/"+a+" arg", env); got != byName {
				t.Errorf("/%s (alias of %s) = %q, want %q", a, info.Name, got, byName)
			}
		}
	}
}

func TestListHasUsageAndDescription(t *testing.T) {
	for _, info := range New().List() {
		if info.Usage == "" || info.Description == "" {
			t.Errorf("%s: usage %q, description %q", info.Name, info.Usage, info.Description)
		}
		if !strings.HasPrefix(info.Usage, "/"+info.Name) {
			t.Errorf("%s: usage %q does not start with its name", info.Name, info.Usage)
		}
	}
}

func TestListReturnsCopies(t *testing.T) {
	r := New()
	r.List()[0].Aliases[0] = "changed"
	if got := r.Execute(context.Background(), "/catch-up", Env{}); strings.HasPrefix(got, "Unknown") {
		t.Fatalf("mutating List() output changed the registry: %q", got)
	}
}

func TestSearch(t *testing.T) {
	r := New()
	names := func(infos []Info) []string {
		out := make([]string, len(infos))
		for i, in := range infos {
			out[i] = in.Name
		}
		return out
	}
	tests := []struct {
		partial string
		want    []string
	}{
		{"", catalogue},
		{"/", catalogue},
		{"wf", []string{"workflow"}},
		{"/CONFIG", []string{"settings"}},
		{"?", []string{"help"}},
		{"zzz", nil},
		{"mp", []string{"plan", "import", "marketplace"}}, // decoMPose, iMPort
	}
	for _, tt := range tests {
		if got := names(r.Search(tt.partial)); strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("Search(%q) = %v, want %v", tt.partial, got, tt.want)
		}
	}
	got := names(r.Search("re"))
	for _, must := range []string{"research", "review"} {
		if !strings.Contains(","+strings.Join(got, ",")+",", ","+must+",") {
			t.Errorf("Search(\"re\") = %v, missing %s", got, must)
		}
	}
}

func TestHandlerFailure(t *testing.T) {
	r := New()
	boom := errors.New("workflow engine down")
	tests := []struct {
		name, in string
		env      Env
		want     string
	}{
		{
			name: "workflow error",
			in:   "/Research topic",
			env: Env{RunWorkflow: func(context.Context, string, string) (string, error) {
				return "", boom
			}},
			want: "Command `/Research` failed: workflow engine down",
		},
		{
			name: "spawn error",
			in:   "/agent coder fix it",
			env: Env{SpawnAgent: func(context.Context, string, string) (string, error) {
				return "", errors.New("no slots")
			}},
			want: "Command `/agent` failed: no slots",
		},
		{
			name: "panic with string",
			in:   "/skills",
			env:  Env{ListSkills: func(context.Context) []string { panic("skills exploded") }},
			want: "Command `/skills` failed: skills exploded",
		},
		{
			name: "panic with error",
			in:   "/memory x",
			env:  Env{SearchMemory: func(context.Context, string) string { panic(boom) }},
			want: "Command `/memory` failed: workflow engine down",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Execute(context.Background(), tt.in, tt.env); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRegisterRejectsConflicts(t *testing.T) {
	noop := func(context.Context, string, Env) (string, error) { return "", nil }
	tests := []struct {
		name string
		cmd  *command
	}{
		{"duplicate name", &command{name: "now", run: noop}},
		{"alias of another", &command{name: "x", aliases: []string{"recap"}, run: noop}},
		{"alias equals a name", &command{name: "x", aliases: []string{"help"}, run: noop}},
		{"name equals an alias", &command{name: "recap", run: noop}},
		{"alias equals own name", &command{name: "x", aliases: []string{"x"}, run: noop}},
		{"repeated alias", &command{name: "x", aliases: []string{"y", "y"}, run: noop}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New()
			if err := r.register(tt.cmd); err == nil {
				t.Fatal("register accepted a conflicting command")
			}
			if len(r.List()) != len(catalogue) {
				t.Fatal("a rejected command was partly registered")
			}
		})
	}
}

func TestTokenHelpers(t *testing.T) {
	tests := []struct {
		in, token, name, processing string
	}{
		{"/research quantum", "/research", "research", "Processing /research via AI..."},
		{"  /Draft\tblog post", "/Draft", "Draft", "Processing /Draft via AI..."},
		{"/wf\nlist", "/wf", "wf", "Processing /wf via AI..."},
		{"/now", "/now", "now", "Processing /now via AI..."},
		{"", "", "", "Processing / via AI..."},
	}
	for _, tt := range tests {
		if got := CommandToken(tt.in); got != tt.token {
			t.Errorf("CommandToken(%q) = %q, want %q", tt.in, got, tt.token)
		}
		if got := CommandName(tt.in); got != tt.name {
			t.Errorf("CommandName(%q) = %q, want %q", tt.in, got, tt.name)
		}
		if got := ProcessingText(tt.in); got != tt.processing {
			t.Errorf("ProcessingText(%q) = %q, want %q", tt.in, got, tt.processing)
		}
	}
}

func TestRequiresAIText(t *testing.T) {
	want := "**/research requires AI** — This command needs a working LLM connection.\n\nTo get AI replies, set WAGGLE_LLM_URL and save any key at /api/vault."
	if got := RequiresAIText("/research"); got != want {
		t.Errorf("RequiresAIText = %q, want %q", got, want)
	}
}

func TestReroute(t *testing.T) {
	r := New()
	res := r.Execute(context.Background(), "/connectors", Env{})
	prompt, ok := Reroute(res)
	if !ok || !strings.HasPrefix(res, protocol.RerouteAgentLoopPrefix) {
		t.Fatalf("/connectors should reroute, got %q", res)
	}
	if strings.Contains(prompt, protocol.RerouteAgentLoopPrefix) || !strings.HasPrefix(prompt, "List all my connected services") {
		t.Errorf("prompt = %q", prompt)
	}
	if _, ok := Reroute("## Right Now"); ok {
		t.Error("plain text reported as a reroute")
	}
}

func TestConcurrentExecute(t *testing.T) {
	r := New()
	done := make(chan string)
	for range 8 {
		go func() { done <- r.Execute(context.Background(), "/help", Env{}) }()
	}
	first := <-done
	for range 7 {
		if got := <-done; got != first {
			t.Fatal("concurrent /help answers differ")
		}
	}
}
