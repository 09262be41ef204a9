package slash

import (
	"context"
	"strconv"
	"strings"
)

// Workflow template names understood by Env.RunWorkflow.
const (
	WorkflowResearchTeam     = "research-team"
	WorkflowReviewPair       = "review-pair"
	WorkflowDecisionAnalysis = "decision-analysis"
	WorkflowPlanExecute      = "plan-execute"
)

// workflowCommands returns the 22 workflow commands in registration order.
// help needs the registry to build its table from the other commands.
func workflowCommands(r *Registry) []*command {
	return []*command{
		{
			name: "catchup", aliases: []string{"catch-up", "recap"}, usage: "/catchup",
			description: "Workspace restart summary — get up to speed instantly",
			helpLabel:   "/catchup",
			run:         runCatchup,
		},
		{
			name: "now", aliases: []string{"current", "where"}, usage: "/now",
			description: "Current workspace state — what's happening right now",
			helpLabel:   "/now",
			run:         runNow,
		},
		{
			name: "research", aliases: []string{"investigate"}, usage: "/research <topic>",
			description: "Research a topic using web search and memory",
			helpLabel:   "/research <topic>",
			run:         runResearch,
		},
		{
			name: "draft", aliases: []string{"write"}, usage: "/draft <type> [topic]",
			description: "Draft content with workspace context",
			helpLabel:   "/draft <type> [topic]",
			run:         runDraft,
		},
		{
			name: "decide", aliases: []string{"decision", "weigh"}, usage: "/decide <question>",
			description: "Analyze a decision with pros, cons, and recommendation",
			helpLabel:   "/decide <question>",
			run:         runDecide,
		},
		{
			name: "review", aliases: []string{"critique", "check"}, usage: "/review",
			description: "Review the last output for quality",
			helpLabel:   "/review",
			run:         runReview,
		},
		{
			name: "spawn", aliases: []string{"agent", "summon"}, usage: "/spawn <role> [task]",
			description: "Act as a specialist (researcher, writer, coder, etc.)",
			helpLabel:   "/spawn <role> [task]",
			run:         runSpawn,
		},
		{
			name: "skills", aliases: []string{"abilities", "tools"}, usage: "/skills",
			description: "Show active skills in this workspace",
			helpLabel:   "/skills",
			run:         runSkills,
		},
		{
			name: "status", aliases: []string{"report", "progress"}, usage: "/status",
			description: "Project status summary with metrics",
			helpLabel:   "/status",
			run:         runStatus,
		},
		{
			name: "memory", aliases: []string{"remember", "recall"}, usage: "/memory [query]",
			description: "Search or browse workspace memory",
			helpLabel:   "/memory [query]",
			run:         runMemory,
		},
		{
			name: "plan", aliases: []string{"decompose", "break-down"}, usage: "/plan <goal>",
			description: "Break a goal into an actionable plan",
			helpLabel:   "/plan <goal>",
			run:         runPlan,
		},
		{
			name: "focus", aliases: []string{"narrow", "scope"}, usage: "/focus <topic>",
			description: "Narrow agent focus to a specific topic",
			helpLabel:   "/focus <topic>",
			run:         runFocus,
		},
		{
			// "?" stays registered for Search/autocomplete, but "/?" can never
			// reach Execute: "?" is not a word character, so IsCommand is false.
			name: "help", aliases: []string{"commands", "?"}, usage: "/help",
			description: "List all available commands",
			helpLabel:   "/help",
			run: func(context.Context, string, Env) (string, error) {
				return r.helpText(), nil
			},
		},
		{
			name: "plugins", usage: "/plugins",
			description: "List installed plugins and capabilities",
			helpLabel:   "/plugins",
			run:         runPlugins,
		},
		{
			name: "export", usage: "/export [memories|sessions|all|workspace]",
			description: "Export workspace data (memories, sessions, all, workspace)",
			helpLabel:   "/export [type]",
			run:         runExport,
		},
		{
			name: "import", usage: "/import <source>",
			description: "Import data into workspace memory",
			helpLabel:   "/import <source>",
			run:         runImport,
		},
		{
			// The original registered "/config" and "/preferences" with their
			// slash, which no lookup could ever match; they work here.
			name: "settings", aliases: []string{"config", "preferences"}, usage: "/settings",
			description: "Show workspace and agent settings",
			helpLabel:   "/settings",
			run:         runSettings,
		},
		{
			name: "connectors", aliases: []string{"integrations", "connections"}, usage: "/connectors",
			description: "List connected services and their status",
			helpLabel:   "/connectors",
			run:         runConnectors,
		},
		{
			name: "cli", aliases: []string{"cli-tools"}, usage: "/cli [allow|deny|discover] [name]",
			description: "Manage CLI tool access — view, allow, or deny programs",
			helpLabel:   "/cli [action]",
			run:         runCLI,
		},
		{
			name: "search-all", aliases: []string{"find-all"}, usage: "/search-all <query>",
			description: "Search across all workspaces and personal memory",
			helpLabel:   "/search-all <query>",
			run:         runSearchAll,
		},
		{
			name: "workflow", aliases: []string{"wf"}, usage: "/workflow <create|list|run> [args]",
			description: "Create, list, or run custom workflows",
			helpLabel:   "/workflow <sub> [args]",
			run:         runWorkflow,
		},
		{
			name: "pr", aliases: []string{"pull-request", "merge-request"}, usage: "/pr <title>",
			description: "Create a pull request from the current branch",
			helpLabel:   "/pr <title>",
			run:         runPR,
		},
	}
}

// helpText builds the /help table from the catalogue so its rows can never
// drift from what is registered. Rows follow registration order except that
// /help itself comes last, as in the original.
func (r *Registry) helpText() string {
	lines := []string{
		"## Available Commands",
		"",
		"| Command | Description |",
		"|---------|-------------|",
	}
	var self string
	for _, c := range r.commands {
		if c.helpLabel == "" {
			continue
		}
		row := "| `" + c.helpLabel + "` | " + c.description + " |"
		if c.name == "help" {
			self = row
			continue
		}
		lines = append(lines, row)
	}
	if self != "" {
		lines = append(lines, self)
	}
	return strings.Join(lines, "\n")
}

// state returns the workspace state, or "" when there is none.
func state(ctx context.Context, env Env) string {
	if env.WorkspaceState == nil {
		return ""
	}
	s := env.WorkspaceState(ctx)
	if s == NoWorkspaceState {
		return ""
	}
	return s
}

// memories returns the memory search results, or "" when there are none or
// the search is unavailable.
func memories(ctx context.Context, env Env, query string) string {
	if env.SearchMemory == nil {
		return ""
	}
	m := env.SearchMemory(ctx, query)
	if m == NoMemories || m == MemoryUnavailable {
		return ""
	}
	return m
}

func runCatchup(ctx context.Context, _ string, env Env) (string, error) {
	if s := state(ctx, env); s != "" {
		return "## Catch-Up Briefing\n\nHere's what's been happening in this workspace:\n\n" + s, nil
	}
	if m := memories(ctx, env, "recent activity decisions progress updates"); m != "" {
		return "## Catch-Up Briefing\n\nHere's what I found in workspace memory:\n\n" + m +
			"\n\n_Based on stored memories. Start a conversation to build richer context._", nil
	}
	return "## Catch-Up Briefing\n\nThis workspace is fresh — no activity yet.\n\nTry:\n" +
		"- Send a message to start a conversation\n" +
		"- Use `/memory <topic>` to search for saved knowledge\n" +
		"- Save an insight with the chat: \"Remember that...\"", nil
}

func runNow(ctx context.Context, _ string, env Env) (string, error) {
	if s := state(ctx, env); s != "" {
		return "## Right Now\n\n" + s, nil
	}
	if m := memories(ctx, env, "current status tasks in progress"); m != "" {
		return "## Right Now\n\n" + m, nil
	}
	return "## Right Now\n\nNo active context in this workspace yet. Send a message to get started.", nil
}

func runResearch(ctx context.Context, topic string, env Env) (string, error) {
	if topic == "" {
		return "Missing topic. Usage: `/research <topic>`\n\nExample: `/research quantum computing applications`", nil
	}
	if env.RunWorkflow != nil {
		return env.RunWorkflow(ctx, WorkflowResearchTeam, topic)
	}
	if env.WebSearch == nil || !env.WebSearch() {
		// Without a search provider the agent has no web_search: the
		// prompt says so, and asks the model to tell the user, rather
		// than send it looking for a tool it does not have.
		return reroute("I'll research this using the Research Team workflow:\n" +
			"1. Researcher agent searches memory, the workspace's files and known web pages\n" +
			"2. Synthesizer agent combines findings into a report\n" +
			"3. Reviewer agent validates accuracy and completeness\n\n" +
			"Topic: " + topic + "\n\nStarting now...\n\n" +
			webSearchOff + " Begin your answer by telling the user that web search is not configured, so this research " +
			"covers memory and the workspace only. Research the following topic thoroughly. Use search_memory for existing " +
			"knowledge, search_content and read_file for the workspace's files, and web_fetch for any URL the user gave. " +
			"Provide a comprehensive summary with key findings, sources, and implications:\n\n" + topic), nil
	}
	return reroute("I'll research this using the Research Team workflow:\n" +
		"1. Researcher agent searches web + memory (5+ sources)\n" +
		"2. Synthesizer agent combines findings into a report\n" +
		"3. Reviewer agent validates accuracy and completeness\n\n" +
		"Topic: " + topic + "\n\nStarting now...\n\n" +
		"Research the following topic thoroughly. Use web_search for current information, web_fetch to read the best " +
		"results, and search_memory for existing knowledge. " +
		"Provide a comprehensive summary with key findings, sources, and implications:\n\n" + topic), nil
}

// webSearchOff is what /research tells the agent when no search provider
// is configured.
const webSearchOff = "Web search is not configured on this server (an operator sets \"webSearch\" in config.json: " +
	"searxng, brave or tavily), so web_search is not available."

func runDraft(ctx context.Context, task string, env Env) (string, error) {
	if task == "" {
		return "Missing draft type. Usage: `/draft <type> [topic]`\n\nExamples:\n" +
			"- `/draft blog post about AI safety`\n" +
			"- `/draft report quarterly metrics`\n" +
			"- `/draft email to client about delays`", nil
	}
	if env.RunWorkflow != nil {
		return env.RunWorkflow(ctx, WorkflowReviewPair, task)
	}
	return reroute("I'll use the Review Pair workflow:\n" +
		"1. Writer agent creates initial draft\n" +
		"2. Reviewer agent critiques for accuracy and style\n" +
		"3. Reviser agent incorporates feedback\n\n" +
		"Task: " + task + "\n\n" +
		"Draft the following. Search memory first for relevant context, then produce a complete, well-structured draft. " +
		"If appropriate, generate a DOCX file:\n\n" + task), nil
}

func runDecide(ctx context.Context, question string, env Env) (string, error) {
	if question == "" {
		return "Missing question. Usage: `/decide <question>`\n\nExample: `/decide Should we use PostgreSQL or MongoDB?`", nil
	}
	if env.RunWorkflow != nil {
		return env.RunWorkflow(ctx, WorkflowDecisionAnalysis, question)
	}
	return reroute("Analyze this decision and provide a filled-in decision matrix with specific pros, cons, risks, effort estimates, " +
		"and a clear recommendation. Search memory for any prior context on this topic:\n\n" + question), nil
}

func runReview(ctx context.Context, _ string, env Env) (string, error) {
	if env.RunWorkflow != nil {
		return env.RunWorkflow(ctx, WorkflowReviewPair, "Review the last output for accuracy, completeness, and quality.")
	}
	return reroute("Review your last response for accuracy, completeness, and quality. " +
		"Identify any issues, gaps, or improvements. Be critical and specific."), nil
}

func runSpawn(ctx context.Context, args string, env Env) (string, error) {
	if args == "" {
		return "Missing role. Usage: `/spawn <role> [task]`\n\n" +
			"Available roles: `researcher`, `writer`, `coder`, `analyst`, `reviewer`, `planner`\n\n" +
			"Example: `/spawn researcher Find recent papers on transformer architectures`", nil
	}
	parts := strings.FieldsFunc(args, isJSSpace)
	role, task := parts[0], strings.Join(parts[1:], " ")
	if env.SpawnAgent != nil {
		if task == "" {
			task = "Act as a " + role + " and assist with the current workspace task."
		}
		return env.SpawnAgent(ctx, role, task)
	}
	if task == "" {
		task = "assist with the current workspace task"
	}
	return reroute("Act as a specialist " + role + ". " + task +
		". Use all available tools (web_search, search_memory, bash, read_file, etc.) to deliver thorough results."), nil
}

func runSkills(ctx context.Context, _ string, env Env) (string, error) {
	if env.ListSkills == nil {
		return "Skill listing is not available in this context.", nil
	}
	skills := env.ListSkills(ctx)
	if len(skills) == 0 {
		return "## Active Skills\n\nNo skills are currently active in this workspace.", nil
	}
	lines := make([]string, len(skills))
	for i, s := range skills {
		lines[i] = "- `" + s + "`"
	}
	return "## Active Skills\n\n" + strings.Join(lines, "\n") + "\n\n_" + strconv.Itoa(len(skills)) + " skill(s) loaded._", nil
}

// runStatus reports metrics (unlike /catchup's narrative); memory is only a
// fallback when neither state nor a skill list is available.
func runStatus(ctx context.Context, _ string, env Env) (string, error) {
	sections := []string{"## Status Report"}
	if s := state(ctx, env); s != "" {
		sections = append(sections, s)
	}
	if env.ListSkills != nil {
		sections = append(sections, "**Skills loaded:** "+strconv.Itoa(len(env.ListSkills(ctx))))
	}
	if len(sections) == 1 {
		if m := memories(ctx, env, "status progress milestones"); m != "" {
			sections = append(sections, m)
		}
	}
	if len(sections) == 1 {
		sections = append(sections, "No workspace data available yet. Start a conversation to build context.")
	}
	return strings.Join(sections, "\n\n"), nil
}

func runMemory(ctx context.Context, query string, env Env) (string, error) {
	if env.SearchMemory == nil {
		return "Memory search is not available in this context.", nil
	}
	if query == "" {
		return "## Memory\n\nUsage: `/memory <query>` to search workspace memory.\n\nExamples:\n" +
			"- `/memory architecture decisions`\n" +
			"- `/memory last meeting notes`\n" +
			"- `/memory project goals`", nil
	}
	return "## Memory Search: \"" + query + "\"\n\n" + env.SearchMemory(ctx, query), nil
}

func runPlan(ctx context.Context, goal string, env Env) (string, error) {
	if goal == "" {
		return "Missing goal. Usage: `/plan <goal>`\n\nExample: `/plan Build a user dashboard with analytics`", nil
	}
	if env.RunWorkflow != nil {
		return env.RunWorkflow(ctx, WorkflowPlanExecute, goal)
	}
	return reroute("I'll use the Plan & Execute workflow:\n" +
		"1. Planner decomposes into sub-tasks\n" +
		"2. Executor works through each step\n" +
		"3. Summarizer consolidates results\n\n" +
		"Goal: " + goal + "\n\n" +
		"Create a detailed, actionable plan for the following goal. Break it into phases, each with specific tasks, " +
		"dependencies, and deliverables. Search memory for any existing context:\n\n" + goal), nil
}

// runFocus is purely textual: no state changes, as in the original.
func runFocus(_ context.Context, topic string, _ Env) (string, error) {
	if topic == "" {
		return "Missing topic. Usage: `/focus <topic>`\n\nExample: `/focus database performance optimization`", nil
	}
	return strings.Join([]string{
		"## Focus: " + topic,
		"",
		"Context narrowed to **" + topic + "**. Subsequent responses will prioritize this topic.",
		"",
		"> Tip: Use /focus again to change, or just ask about anything else to broaden context.",
	}, "\n"), nil
}

func runPlugins(ctx context.Context, _ string, env Env) (string, error) {
	n := 0
	if env.ListSkills != nil {
		n = len(env.ListSkills(ctx))
	}
	return strings.Join([]string{
		"## Installed Plugins & Capabilities",
		"",
		"**" + strconv.Itoa(n) + " skills active** in this workspace.",
		"",
		"Use `/marketplace` to browse and install capability packs.",
		"Use `/skills` for a detailed list of loaded skills.",
	}, "\n"), nil
}

func runExport(_ context.Context, args string, env Env) (string, error) {
	what := strings.ToLower(args)
	ws := "\"" + env.Workspace + "\""
	switch what {
	case "":
		return strings.Join([]string{
			"## Export Workspace Data",
			"",
			"Usage: `/export <type>`",
			"",
			"| Type | Description |",
			"|------|-------------|",
			"| `memories` | Export all workspace memories as JSON/Markdown |",
			"| `sessions` | Export conversation sessions and history |",
			"| `all` | Export everything (memories + sessions + settings) |",
			"| `workspace` | Export workspace configuration and metadata |",
			"",
			"Example: `/export memories`",
		}, "\n"), nil
	case "memories":
		return reroute("Export all workspace memories for workspace " + ws + ". Use search_memory to retrieve all memories, " +
			"then format them as a comprehensive Markdown document with categories, dates, and importance levels. Offer to save as a file."), nil
	case "sessions":
		return reroute("Export conversation sessions for workspace " + ws + ". List all sessions with their titles, dates, " +
			"and message counts. Offer to export as JSON or summarized Markdown."), nil
	case "all":
		return reroute("Export all data for workspace " + ws + ": memories, sessions, and settings. Create a comprehensive export package. " +
			"List what's available (memory count, session count) and export as organized files."), nil
	case "workspace":
		return reroute("Export workspace configuration and metadata for workspace " + ws + ". " +
			"Include workspace name, group, model, persona, linked directory, and any custom settings."), nil
	}
	return "Unknown export type: \"" + what + "\". Run `/export` without arguments to see available types.", nil
}

func runImport(_ context.Context, source string, env Env) (string, error) {
	if source == "" {
		return strings.Join([]string{
			"## Import Data",
			"",
			"Usage: `/import <source>`",
			"",
			"**Supported sources:**",
			"- **Text**: `/import` then paste content in the next message",
			"- **File path**: `/import /path/to/file.md`",
			"- **URL**: `/import https://example.com/document`",
			"- **Clipboard**: `/import clipboard`",
			"",
			"**Supported formats:** Markdown, JSON, plain text, CSV",
			"",
			"Example: `/import ./notes/meeting-2026-03-25.md`",
		}, "\n"), nil
	}
	return reroute("Help the user import data into workspace \"" + env.Workspace + "\" from source: " + source +
		". Read or fetch the content, then save relevant information as workspace memories. Confirm what was imported."), nil
}

func runSettings(_ context.Context, _ string, env Env) (string, error) {
	return reroute("Show the current settings for workspace \"" + env.Workspace +
		"\": model, persona, linked directory, budget, and suggest what can be changed. Check memory for any stored preferences."), nil
}

func runConnectors(context.Context, string, Env) (string, error) {
	return reroute("List all my connected services and their health status. " +
		"Show which are connected, which need setup, and how to connect new ones."), nil
}

const cliUsage = "Usage: `/cli` (show allowlist), `/cli allow <name>`, `/cli deny <name>`, `/cli discover`"

// runCLI only explains how to change the allowlist; it changes no config.
// Unlike the original, "/cli allow" with no name answers with the allow
// usage line (the original's check for it could never be reached).
func runCLI(_ context.Context, args string, _ Env) (string, error) {
	if args == "" {
		return "No CLI tools explicitly allowed. The agent auto-discovers common CLIs (git, node, docker, etc.) on your PATH.\n\n" +
			"Use `/cli allow <name>` to add a CLI to the allowlist.", nil
	}
	if args == "discover" {
		return reroute("Run cli_discover to find all available CLI tools on the system PATH. List each found program with its version."), nil
	}
	sub, rest, _ := strings.Cut(args, " ")
	name := trim(rest)
	switch sub {
	case "allow":
		if name == "" {
			return "Usage: `/cli allow <program-name>`", nil
		}
		return "To allow \"" + name + "\", add it to your CLI allowlist in ~/.waggle/config.json under \"cliAllowlist\": [\"" + name + "\"].\n\n" +
			"Automatic config update coming soon.", nil
	case "deny":
		if name == "" {
			return "Usage: `/cli deny <program-name>`", nil
		}
		return "To deny \"" + name + "\", remove it from \"cliAllowlist\" in ~/.waggle/config.json.\n\n" +
			"Automatic config update coming soon.", nil
	}
	return cliUsage, nil
}

func runSearchAll(_ context.Context, query string, _ Env) (string, error) {
	if query == "" {
		return "Missing query. Usage: `/search-all <query>`\n\nExample: `/search-all project deadlines`", nil
	}
	// There is no cross-workspace tool: search_memory reaches this
	// workspace's memory and the user's personal memory, and the prompt
	// says where the search stops instead of naming a tool that does not
	// exist.
	return reroute("Search across all my workspaces for: " + query +
		". Use search_memory, which searches this workspace's memory and my personal memory; other workspaces' " +
		"memories cannot be searched from here, so say so. Summarize the results by where they came from."), nil
}

func runWorkflow(_ context.Context, args string, _ Env) (string, error) {
	if args == "" {
		return strings.Join([]string{
			"## Workflow Manager",
			"",
			"Usage: `/workflow <subcommand> [args]`",
			"",
			"| Subcommand | Description |",
			"|------------|-------------|",
			"| `create <description>` | Create a custom multi-agent workflow from a description |",
			"| `list` | List all available workflows (built-in and custom) |",
			"| `run <name>` | Run a workflow by name |",
			"",
			"Examples:",
			"- `/workflow create Research a topic, then draft a report, then review it`",
			"- `/workflow list`",
			"- `/workflow run research-and-report`",
		}, "\n"), nil
	}
	sub, rest, _ := strings.Cut(args, " ")
	sub, rest = strings.ToLower(sub), trim(rest)
	switch sub {
	case "create":
		if rest == "" {
			return "Missing description. Usage: `/workflow create <description>`\n\n" +
				"Example: `/workflow create Research competitors, summarize findings, and draft an executive brief`", nil
		}
		return reroute("Create a custom multi-agent workflow based on this description: " + rest +
			". Use the compose_workflow tool to analyze the task and create a reusable template. Save it using the skill creation tools."), nil
	case "list":
		return reroute("List all available workflows including built-in and custom ones. Check loaded skills for workflow-type skills, " +
			"and list the built-in workflow templates (research-team, review-pair, plan-execute, decision-analysis)."), nil
	case "run":
		if rest == "" {
			return "Missing workflow name. Usage: `/workflow run <name>`\n\nExample: `/workflow run research-team`", nil
		}
		return reroute("Run the workflow named " + rest +
			". If it's a built-in workflow template, execute it. If it's a custom skill-based workflow, load and execute it."), nil
	}
	return "Unknown subcommand: \"" + sub + "\". Available: `create`, `list`, `run`. Run `/workflow` for help.", nil
}

func runPR(_ context.Context, title string, _ Env) (string, error) {
	if title == "" {
		return "Missing title. Usage: `/pr <title>`\n\nExample: `/pr Add user authentication module`", nil
	}
	// No tool here talks to a code host: the agent prepares the branch and
	// the commit with the git tools and hands the user the PR text.
	return reroute("Create a pull request with title: \"" + title +
		"\". First run git_status and git_log to gather context, and git_diff to see the changes. Create a branch with " +
		"git_branch and commit the changes with git_commit if that is still needed. Opening the PR on the code host is " +
		"not possible from here: give the user the title and a PR body summarizing the changes, ready to paste."), nil
}
