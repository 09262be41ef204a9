package slash

import (
	"context"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

func exec(t *testing.T, in string, env Env) string {
	t.Helper()
	return New().Execute(context.Background(), in, env)
}

const wantHelp = "## Available Commands\n" +
	"\n" +
	"| Command | Description |\n" +
	"|---------|-------------|\n" +
	"| `/catchup` | Workspace restart summary — get up to speed instantly |\n" +
	"| `/now` | Current workspace state — what's happening right now |\n" +
	"| `/research <topic>` | Research a topic using web search and memory |\n" +
	"| `/draft <type> [topic]` | Draft content with workspace context |\n" +
	"| `/decide <question>` | Analyze a decision with pros, cons, and recommendation |\n" +
	"| `/review` | Review the last output for quality |\n" +
	"| `/spawn <role> [task]` | Act as a specialist (researcher, writer, coder, etc.) |\n" +
	"| `/skills` | Show active skills in this workspace |\n" +
	"| `/status` | Project status summary with metrics |\n" +
	"| `/memory [query]` | Search or browse workspace memory |\n" +
	"| `/plan <goal>` | Break a goal into an actionable plan |\n" +
	"| `/focus <topic>` | Narrow agent focus to a specific topic |\n" +
	"| `/plugins` | List installed plugins and capabilities |\n" +
	"| `/export [type]` | Export workspace data (memories, sessions, all, workspace) |\n" +
	"| `/import <source>` | Import data into workspace memory |\n" +
	"| `/settings` | Show workspace and agent settings |\n" +
	"| `/connectors` | List connected services and their status |\n" +
	"| `/cli [action]` | Manage CLI tool access — view, allow, or deny programs |\n" +
	"| `/search-all <query>` | Search across all workspaces and personal memory |\n" +
	"| `/workflow <sub> [args]` | Create, list, or run custom workflows |\n" +
	"| `/pr <title>` | Create a pull request from the current branch |\n" +
	"| `/help` | List all available commands |"

func TestHelpExactTable(t *testing.T) {
	got := exec(t, "/help", Env{})
	if got != wantHelp {
		t.Fatalf("/help =\n%s\nwant\n%s", got, wantHelp)
	}
	rows := 0
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "| `/") {
			rows++
		}
	}
	if rows != 22 || strings.Contains(got, "marketplace") {
		t.Errorf("/help has %d rows (want 22) or lists marketplace", rows)
	}
	if exec(t, "/commands", Env{}) != wantHelp {
		t.Error("/commands differs from /help")
	}
}

// TestHelpDescriptionsMatchList keeps /help and List() telling one story.
func TestHelpDescriptionsMatchList(t *testing.T) {
	for _, info := range New().List() {
		if info.Name == "marketplace" {
			continue
		}
		if !strings.Contains(wantHelp, "| "+info.Description+" |") {
			t.Errorf("%s: description %q is not the /help description", info.Name, info.Description)
		}
	}
}

func TestMissingArgumentTexts(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/research", "Missing topic. Usage: `/research <topic>`\n\nExample: `/research quantum computing applications`"},
		{"/research   ", "Missing topic. Usage: `/research <topic>`\n\nExample: `/research quantum computing applications`"},
		{"/draft", "Missing draft type. Usage: `/draft <type> [topic]`\n\nExamples:\n- `/draft blog post about AI safety`\n- `/draft report quarterly metrics`\n- `/draft email to client about delays`"},
		{"/decide", "Missing question. Usage: `/decide <question>`\n\nExample: `/decide Should we use PostgreSQL or MongoDB?`"},
		{"/spawn", "Missing role. Usage: `/spawn <role> [task]`\n\nAvailable roles: `researcher`, `writer`, `coder`, `analyst`, `reviewer`, `planner`\n\nExample: `/spawn researcher Find recent papers on transformer architectures`"},
		{"/plan", "Missing goal. Usage: `/plan <goal>`\n\nExample: `/plan Build a user dashboard with analytics`"},
		{"/focus", "Missing topic. Usage: `/focus <topic>`\n\nExample: `/focus database performance optimization`"},
		{"/search-all", "Missing query. Usage: `/search-all <query>`\n\nExample: `/search-all project deadlines`"},
		{"/pr", "Missing title. Usage: `/pr <title>`\n\nExample: `/pr Add user authentication module`"},
		{"/workflow create", "Missing description. Usage: `/workflow create <description>`\n\nExample: `/workflow create Research competitors, summarize findings, and draft an executive brief`"},
		{"/workflow run", "Missing workflow name. Usage: `/workflow run <name>`\n\nExample: `/workflow run research-team`"},
	}
	// A workflow runner must not be called without an argument.
	env := Env{
		RunWorkflow: func(context.Context, string, string) (string, error) { panic("called") },
		SpawnAgent:  func(context.Context, string, string) (string, error) { panic("called") },
	}
	for _, tt := range tests {
		if got := exec(t, tt.in, env); got != tt.want {
			t.Errorf("%s =\n%q\nwant\n%q", tt.in, got, tt.want)
		}
	}
}

func TestReroutePrompts(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"/research quantum computing", []string{"Research Team workflow", "Topic: quantum computing\n", "Web search is not configured on this server", "telling the user", "sources, and implications:\n\nquantum computing"}},
		{"/draft blog post about Go", []string{"Review Pair workflow", "Task: blog post about Go\n", "If appropriate, generate a DOCX file:\n\nblog post about Go"}},
		{"/decide Should we use PostgreSQL or MongoDB?", []string{"decision matrix", "clear recommendation", "prior context on this topic:\n\nShould we use PostgreSQL or MongoDB?"}},
		{"/review", []string{"Review your last response for accuracy, completeness, and quality. Identify any issues, gaps, or improvements. Be critical and specific."}},
		{"/spawn researcher find papers", []string{"Act as a specialist researcher. find papers. Use all available tools (web_search, search_memory, bash, read_file, etc.) to deliver thorough results."}},
		{"/spawn  coder", []string{"Act as a specialist coder. assist with the current workspace task. Use all available tools"}},
		{"/plan launch v2", []string{"Plan & Execute workflow", "Goal: launch v2\n", "Search memory for any existing context:\n\nlaunch v2"}},
		{"/import https://x.test/doc", []string{"Help the user import data into workspace \"ws-7\" from source: https://x.test/doc. Read or fetch the content"}},
		{"/settings", []string{"Show the current settings for workspace \"ws-7\": model, persona, linked directory, budget"}},
		{"/config", []string{"Show the current settings for workspace \"ws-7\""}},
		{"/preferences", []string{"Show the current settings for workspace \"ws-7\""}},
		{"/connectors", []string{"List all my connected services and their health status. Show which are connected, which need setup, and how to connect new ones."}},
		{"/search-all deadlines", []string{"Search across all my workspaces for: deadlines. Use search_memory", "cannot be searched from here"}},
		{"/pr Add auth", []string{"Create a pull request with title: \"Add auth\". First run git_status and git_log", "git_diff", "git_branch", "git_commit", "ready to paste"}},
		{"/cli discover", []string{"Run cli_discover to find all available CLI tools on the system PATH."}},
	}
	for _, tt := range tests {
		got := exec(t, tt.in, Env{Workspace: "ws-7"})
		if !strings.HasPrefix(got, protocol.RerouteAgentLoopPrefix) {
			t.Errorf("%s: not a reroute: %q", tt.in, got)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q does not contain %q", tt.in, got, w)
			}
		}
	}
}

func TestResearchRerouteFullText(t *testing.T) {
	want := protocol.RerouteAgentLoopPrefix + "I'll research this using the Research Team workflow:\n" +
		"1. Researcher agent searches web + memory (5+ sources)\n" +
		"2. Synthesizer agent combines findings into a report\n" +
		"3. Reviewer agent validates accuracy and completeness\n\n" +
		"Topic: q\n\nStarting now...\n\n" +
		"Research the following topic thoroughly. Use web_search for current information, web_fetch to read the best " +
		"results, and search_memory for existing knowledge. " +
		"Provide a comprehensive summary with key findings, sources, and implications:\n\nq"
	if got := exec(t, "/research   q  ", Env{WebSearch: func() bool { return true }}); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	// Without a provider the agent has no web_search, and the prompt
	// neither sends it looking for one nor hides that from the user.
	got := exec(t, "/research q", Env{WebSearch: func() bool { return false }})
	if strings.Contains(got, "Use web_search") || !strings.Contains(got, webSearchOff) ||
		!strings.Contains(got, "Begin your answer by telling the user that web search is not configured") {
		t.Errorf("without a provider: %q", got)
	}
}

type call struct{ fn, a, b string }

func TestDelegation(t *testing.T) {
	tests := []struct {
		in   string
		want call
	}{
		{"/research quantum computing", call{"workflow", "research-team", "quantum computing"}},
		{"/investigate x", call{"workflow", "research-team", "x"}},
		{"/draft report Q3", call{"workflow", "review-pair", "report Q3"}},
		{"/decide A or B?", call{"workflow", "decision-analysis", "A or B?"}},
		{"/review", call{"workflow", "review-pair", "Review the last output for accuracy, completeness, and quality."}},
		{"/plan ship it", call{"workflow", "plan-execute", "ship it"}},
		{"/spawn researcher find   papers", call{"spawn", "researcher", "find papers"}},
		{"/summon analyst", call{"spawn", "analyst", "Act as a analyst and assist with the current workspace task."}},
	}
	for _, tt := range tests {
		var got []call
		env := Env{
			RunWorkflow: func(_ context.Context, name, task string) (string, error) {
				got = append(got, call{"workflow", name, task})
				return "RESULT", nil
			},
			SpawnAgent: func(_ context.Context, role, task string) (string, error) {
				got = append(got, call{"spawn", role, task})
				return "RESULT", nil
			},
		}
		out := exec(t, tt.in, env)
		if out != "RESULT" {
			t.Errorf("%s: result %q, want the delegate's text", tt.in, out)
		}
		if len(got) != 1 || got[0] != tt.want {
			t.Errorf("%s: calls %+v, want [%+v]", tt.in, got, tt.want)
		}
	}
}

func TestFocusExactText(t *testing.T) {
	want := "## Focus: database tuning\n\nContext narrowed to **database tuning**. Subsequent responses will prioritize this topic.\n\n" +
		"> Tip: Use /focus again to change, or just ask about anything else to broaden context."
	for _, in := range []string{"/focus database tuning", "/scope   database tuning ", "/NARROW database tuning"} {
		if got := exec(t, in, Env{}); got != want {
			t.Errorf("%s =\n%q\nwant\n%q", in, got, want)
		}
	}
}

// envWith builds an Env whose funcs return the given texts; "" leaves the
// func nil. The searched queries are recorded.
func envWith(state, mem string, skills []string, queries *[]string) Env {
	env := Env{}
	if state != "" {
		env.WorkspaceState = func(context.Context) string { return state }
	}
	if mem != "" {
		env.SearchMemory = func(_ context.Context, q string) string {
			*queries = append(*queries, q)
			return mem
		}
	}
	if skills != nil {
		env.ListSkills = func(context.Context) []string { return skills }
	}
	return env
}

func TestStateCommands(t *testing.T) {
	fresh := "## Catch-Up Briefing\n\nThis workspace is fresh — no activity yet.\n\nTry:\n- Send a message to start a conversation\n" +
		"- Use `/memory <topic>` to search for saved knowledge\n- Save an insight with the chat: \"Remember that...\""
	nowEmpty := "## Right Now\n\nNo active context in this workspace yet. Send a message to get started."
	statusEmpty := "## Status Report\n\nNo workspace data available yet. Start a conversation to build context."
	tests := []struct {
		name        string
		in          string
		state, mem  string
		skills      []string
		want        string
		wantQueries []string
	}{
		{"catchup state", "/catchup", "# Workspace Now — X", "1. m", nil,
			"## Catch-Up Briefing\n\nHere's what's been happening in this workspace:\n\n# Workspace Now — X", nil},
		{"catchup memory", "/recap", NoWorkspaceState, "1. m", nil,
			"## Catch-Up Briefing\n\nHere's what I found in workspace memory:\n\n1. m\n\n_Based on stored memories. Start a conversation to build richer context._",
			[]string{"recent activity decisions progress updates"}},
		{"catchup no memories", "/catchup", NoWorkspaceState, NoMemories, nil, fresh,
			[]string{"recent activity decisions progress updates"}},
		{"catchup memory unavailable", "/catchup", "", MemoryUnavailable, nil, fresh,
			[]string{"recent activity decisions progress updates"}},
		{"catchup nothing wired", "/catchup", "", "", nil, fresh, nil},
		{"now state", "/now", "S", "1. m", nil, "## Right Now\n\nS", nil},
		{"now memory", "/where", NoWorkspaceState, "1. m", nil, "## Right Now\n\n1. m",
			[]string{"current status tasks in progress"}},
		{"now empty", "/now", NoWorkspaceState, NoMemories, nil, nowEmpty,
			[]string{"current status tasks in progress"}},
		{"now nothing wired", "/current", "", "", nil, nowEmpty, nil},
		{"status state and skills", "/status", "S", "1. m", []string{"a", "b"},
			"## Status Report\n\nS\n\n**Skills loaded:** 2", nil},
		{"status zero skills counts as data", "/status", NoWorkspaceState, "1. m", []string{},
			"## Status Report\n\n**Skills loaded:** 0", nil},
		{"status memory fallback", "/report", NoWorkspaceState, "1. m", nil,
			"## Status Report\n\n1. m", []string{"status progress milestones"}},
		{"status empty", "/progress", NoWorkspaceState, NoMemories, nil, statusEmpty,
			[]string{"status progress milestones"}},
		{"status nothing wired", "/status", "", "", nil, statusEmpty, nil},
		{"skills listed", "/skills", "", "", []string{"web", "docx"},
			"## Active Skills\n\n- `web`\n- `docx`\n\n_2 skill(s) loaded._", nil},
		{"skills none", "/tools", "", "", []string{},
			"## Active Skills\n\nNo skills are currently active in this workspace.", nil},
		{"skills unavailable", "/abilities", "", "", nil,
			"Skill listing is not available in this context.", nil},
		{"memory search", "/memory  architecture decisions ", "", "1. ADR", nil,
			"## Memory Search: \"architecture decisions\"\n\n1. ADR", []string{"architecture decisions"}},
		{"memory shows no-result text", "/recall x", "", NoMemories, nil,
			"## Memory Search: \"x\"\n\nNo relevant memories found.", []string{"x"}},
		{"memory usage", "/memory", "", "1. m", nil,
			"## Memory\n\nUsage: `/memory <query>` to search workspace memory.\n\nExamples:\n- `/memory architecture decisions`\n- `/memory last meeting notes`\n- `/memory project goals`", nil},
		{"memory unavailable", "/remember x", "", "", nil,
			"Memory search is not available in this context.", nil},
		{"plugins", "/plugins", "", "", []string{"a", "b", "c"},
			"## Installed Plugins & Capabilities\n\n**3 skills active** in this workspace.\n\nUse `/marketplace` to browse and install capability packs.\nUse `/skills` for a detailed list of loaded skills.", nil},
		{"plugins without skills", "/plugins", "", "", nil,
			"## Installed Plugins & Capabilities\n\n**0 skills active** in this workspace.\n\nUse `/marketplace` to browse and install capability packs.\nUse `/skills` for a detailed list of loaded skills.", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var queries []string
			got := exec(t, tt.in, envWith(tt.state, tt.mem, tt.skills, &queries))
			if got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
			if strings.Join(queries, "|") != strings.Join(tt.wantQueries, "|") {
				t.Errorf("memory queries %q, want %q", queries, tt.wantQueries)
			}
		})
	}
}

func TestWorkflowSubcommands(t *testing.T) {
	help := "## Workflow Manager\n\nUsage: `/workflow <subcommand> [args]`\n\n| Subcommand | Description |\n|------------|-------------|\n" +
		"| `create <description>` | Create a custom multi-agent workflow from a description |\n" +
		"| `list` | List all available workflows (built-in and custom) |\n" +
		"| `run <name>` | Run a workflow by name |\n\nExamples:\n" +
		"- `/workflow create Research a topic, then draft a report, then review it`\n- `/workflow list`\n- `/workflow run research-and-report`"
	tests := []struct {
		in, want string
		reroute  bool
	}{
		{"/workflow", help, false},
		{"/wf", help, false},
		{"/workflow create Research then brief", "Create a custom multi-agent workflow based on this description: Research then brief. Use the compose_workflow tool to analyze the task and create a reusable template. Save it using the skill creation tools.", true},
		{"/wf CREATE  x", "Create a custom multi-agent workflow based on this description: x.", true},
		{"/workflow list", "List all available workflows including built-in and custom ones. Check loaded skills for workflow-type skills, and list the built-in workflow templates (research-team, review-pair, plan-execute, decision-analysis).", true},
		{"/workflow List extra", "List all available workflows", true},
		{"/workflow run research-team", "Run the workflow named research-team. If it's a built-in workflow template, execute it. If it's a custom skill-based workflow, load and execute it.", true},
		{"/workflow Delete x", "Unknown subcommand: \"delete\". Available: `create`, `list`, `run`. Run `/workflow` for help.", false},
	}
	for _, tt := range tests {
		got := exec(t, tt.in, Env{})
		prompt, isReroute := Reroute(got)
		if isReroute != tt.reroute {
			t.Errorf("%s: reroute = %v, want %v (%q)", tt.in, isReroute, tt.reroute, got)
			continue
		}
		if tt.reroute {
			if !strings.HasPrefix(prompt, tt.want) {
				t.Errorf("%s: prompt %q, want prefix %q", tt.in, prompt, tt.want)
			}
		} else if got != tt.want {
			t.Errorf("%s =\n%q\nwant\n%q", tt.in, got, tt.want)
		}
	}
}

func TestCLISubcommands(t *testing.T) {
	usage := "Usage: `/cli` (show allowlist), `/cli allow <name>`, `/cli deny <name>`, `/cli discover`"
	tests := []struct{ in, want string }{
		{"/cli", "No CLI tools explicitly allowed. The agent auto-discovers common CLIs (git, node, docker, etc.) on your PATH.\n\nUse `/cli allow <name>` to add a CLI to the allowlist."},
		{"/cli allow jq", "To allow \"jq\", add it to your CLI allowlist in ~/.waggle/config.json under \"cliAllowlist\": [\"jq\"].\n\nAutomatic config update coming soon."},
		{"/cli-tools allow   rg ", "To allow \"rg\", add it to your CLI allowlist in ~/.waggle/config.json under \"cliAllowlist\": [\"rg\"].\n\nAutomatic config update coming soon."},
		{"/cli deny curl", "To deny \"curl\", remove it from \"cliAllowlist\" in ~/.waggle/config.json.\n\nAutomatic config update coming soon."},
		{"/cli allow", "Usage: `/cli allow <program-name>`"},
		{"/cli deny", "Usage: `/cli deny <program-name>`"},
		{"/cli list", usage},
		{"/cli allowjq", usage},
		{"/cli discover now", usage},
		{"/cli discover", protocol.RerouteAgentLoopPrefix + "Run cli_discover to find all available CLI tools on the system PATH. List each found program with its version."},
	}
	for _, tt := range tests {
		if got := exec(t, tt.in, Env{}); got != tt.want {
			t.Errorf("%s =\n%q\nwant\n%q", tt.in, got, tt.want)
		}
	}
}

func TestExportTypes(t *testing.T) {
	help := "## Export Workspace Data\n\nUsage: `/export <type>`\n\n| Type | Description |\n|------|-------------|\n" +
		"| `memories` | Export all workspace memories as JSON/Markdown |\n" +
		"| `sessions` | Export conversation sessions and history |\n" +
		"| `all` | Export everything (memories + sessions + settings) |\n" +
		"| `workspace` | Export workspace configuration and metadata |\n\nExample: `/export memories`"
	tests := []struct{ in, want string }{
		{"/export", help},
		{"/export memories", protocol.RerouteAgentLoopPrefix + "Export all workspace memories for workspace \"acme\". Use search_memory to retrieve all memories, then format them as a comprehensive Markdown document with categories, dates, and importance levels. Offer to save as a file."},
		{"/export SESSIONS", protocol.RerouteAgentLoopPrefix + "Export conversation sessions for workspace \"acme\". List all sessions with their titles, dates, and message counts. Offer to export as JSON or summarized Markdown."},
		{"/export all", protocol.RerouteAgentLoopPrefix + "Export all data for workspace \"acme\": memories, sessions, and settings. Create a comprehensive export package. List what's available (memory count, session count) and export as organized files."},
		{"/export Workspace", protocol.RerouteAgentLoopPrefix + "Export workspace configuration and metadata for workspace \"acme\". Include workspace name, group, model, persona, linked directory, and any custom settings."},
		{"/export PDF Files", "Unknown export type: \"pdf files\". Run `/export` without arguments to see available types."},
	}
	for _, tt := range tests {
		if got := exec(t, tt.in, Env{Workspace: "acme"}); got != tt.want {
			t.Errorf("%s =\n%q\nwant\n%q", tt.in, got, tt.want)
		}
	}
}

func TestImportHelp(t *testing.T) {
	got := exec(t, "/import", Env{})
	for _, w := range []string{"## Import Data\n\nUsage: `/import <source>`", "- **Clipboard**: `/import clipboard`", "**Supported formats:** Markdown, JSON, plain text, CSV", "Example: `/import ./notes/meeting-2026-03-25.md`"} {
		if !strings.Contains(got, w) {
			t.Errorf("/import help %q lacks %q", got, w)
		}
	}
	if _, ok := Reroute(got); ok {
		t.Error("/import without a source must not reroute")
	}
}
