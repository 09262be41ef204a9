package agent

import (
	"encoding/json"
	"strconv"

	"github.com/waggle-os/core/libs/protocol"
)

// bashPreviewUnits is how much of a bash command the step line shows, in
// UTF-16 code units like the original's String.slice.
const bashPreviewUnits = 80

// DescribeToolUse is the human-readable step line shown when the agent
// calls a tool (reference §7.12). A missing field reads as an empty string.
func DescribeToolUse(name string, input map[string]any) string {
	f := func(key string) string { return jsString(input[key]) }
	switch name {
	case "web_search":
		return `Searching the web for "` + f("query") + `"...`
	case "web_fetch":
		return "Reading web page: " + f("url") + "..."
	case "search_memory":
		return `Searching memory for "` + f("query") + `"...`
	case "save_memory":
		return "Saving to memory..."
	case "get_identity":
		return "Checking identity..."
	case "get_awareness":
		return "Checking current awareness state..."
	case "query_knowledge":
		return "Querying knowledge graph..."
	case "add_task":
		return `Adding task: "` + f("title") + `"...`
	case "correct_knowledge":
		return "Updating knowledge graph..."
	case "bash":
		return "Running command: " + protocol.TruncateUTF16(f("command"), bashPreviewUnits) + "..."
	case "read_file":
		return "Reading file: " + f("path") + "..."
	case "write_file":
		return "Writing file: " + f("path") + "..."
	case "edit_file":
		return "Editing file: " + f("path") + "..."
	case "search_files":
		return `Searching for files matching "` + f("pattern") + `"...`
	case "search_content":
		return `Searching file contents for "` + f("pattern") + `"...`
	case "git_status":
		return "Checking git status..."
	case "git_diff":
		return "Checking git diff..."
	case "git_log":
		return "Checking git log..."
	case "git_commit":
		return "Creating git commit..."
	case "git_branch":
		return "Managing git branches..."
	case "create_plan":
		return `Creating plan: "` + f("title") + `"...`
	case "add_plan_step":
		return "Adding plan step..."
	case "execute_step":
		return "Executing plan step..."
	case "show_plan":
		return "Showing current plan..."
	case "generate_docx":
		return "Generating document: " + f("path") + "..."
	case "generate_xlsx":
		return "Generating spreadsheet: " + f("path") + "..."
	case "read_document":
		return "Reading document: " + f("path") + "..."
	case "list_skills":
		return "Checking installed skills..."
	case "create_skill":
		return "Creating skill: " + f("name") + "..."
	case "delete_skill":
		return "Deleting skill: " + f("name") + "..."
	case "read_skill":
		return "Reading skill: " + f("name") + "..."
	case "search_skills":
		return `Searching for skills: "` + f("query") + `"...`
	case "suggest_skill":
		return "Looking for relevant skills..."
	case "acquire_capability":
		return `Searching for capabilities: "` + f("need") + `"...`
	case "install_capability":
		return "Installing capability: " + f("name") + "..."
	case "compose_workflow":
		return "Analyzing task and composing workflow plan..."
	case "orchestrate_workflow":
		// The original meant to show the template name but an operator
		// precedence slip made it print "inline" whenever one is set; the
		// step text is kept as users saw it.
		if truthy(input["template"]) || truthy(input["inline_template"]) {
			return "Running workflow: inline..."
		}
		return "Running workflow: ..."
	case "spawn_agent":
		return `Spawning sub-agent "` + f("name") + `" (` + f("role") + `)...`
	case "list_agents":
		return "Checking sub-agents..."
	case "get_agent_result":
		return "Getting sub-agent result..."
	default:
		return "Using " + name + "..."
	}
}

// jsString renders a JSON value the way a JavaScript template literal
// would, with a missing value as "".
func jsString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case json.Number:
		return x.String()
	case map[string]any:
		return "[object Object]"
	case []any:
		parts := make([]byte, 0, 16)
		for i, e := range x {
			if i > 0 {
				parts = append(parts, ',')
			}
			parts = append(parts, jsString(e)...)
		}
		return string(parts)
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// truthy is JavaScript truthiness for a decoded JSON value.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	default:
		return true
	}
}
