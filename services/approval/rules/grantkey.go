package rules

import (
	"net/url"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
)

// WildcardTarget is the target key of a grant that is not about one
// particular target. It is compared literally, never as a pattern: a
// write_file grant keyed "*" covers calls without a path, not every path.
const WildcardTarget = "*"

// TargetKey is what an "always allow" grant for this call is about: the
// file for write_file/edit_file, the other workspace for
// read_other_workspace/list_workspace_files, the command for bash
// (BashTargetKey: one grant covers that command, never every command), and
// WildcardTarget for every other tool (one grant covers all its calls). An MCP tool's target is its
// server and tool ("<server>/<tool>"): a grant covers every call of that
// one tool of that one server.
func TargetKey(tool string, args map[string]any) string {
	if server, name, ok := protocol.ParseMCPToolName(tool); ok {
		return server + "/" + name
	}
	var key string
	switch tool {
	case ToolWriteFile, ToolEditFile:
		v := args["path"]
		if v == nil {
			v = args["file_path"]
		}
		// Trimmed as the file tools trim a path (strings.TrimSpace), so two
		// paths with one key always name one file.
		key = strings.TrimSpace(jsString(v))
	case ToolReadOtherWorkspace, ToolListWorkspaceFiles:
		key = jsTrim(argString(args, "target_workspace_id"))
	case ToolBash:
		key = BashTargetKey(argString(args, "command"))
	case ToolWebFetch:
		key = webFetchHost(argString(args, "url"))
	}
	if key == "" {
		return WildcardTarget
	}
	return key
}

// DescribeGrant is the human description stored with a grant and listed in
// the approvals inbox. source is the workspace the grant is scoped to (nil:
// every workspace).
func DescribeGrant(tool, targetKey string, source *string) string {
	if server, name, ok := protocol.ParseMCPToolName(tool); ok {
		return `Use ` + name + ` of MCP server "` + server + `"`
	}
	switch {
	case tool == ToolReadOtherWorkspace:
		d := `Read workspace "` + targetKey + `"`
		if source != nil && *source != "" {
			d += ` from "` + *source + `"`
		}
		return d
	case tool == ToolListWorkspaceFiles:
		return `List files in workspace "` + targetKey + `"`
	case tool == ToolWriteFile || tool == ToolEditFile:
		if targetKey == WildcardTarget {
			return "Write any file"
		}
		return "Write to " + targetKey
	case tool == ToolBash:
		if targetKey == WildcardTarget {
			return "Run bash with no command"
		}
		return "Run the command: " + targetKey
	case tool == ToolWebFetch:
		if targetKey == WildcardTarget {
			return "Fetch web pages on private addresses"
		}
		return "Fetch web pages from " + targetKey + " (a private address)"
	case tool == ToolGenerateDocx:
		return "Generate .docx documents"
	case tool == ToolGenerateXlsx:
		return "Generate .xlsx workbooks"
	case tool == ToolInstallCapability:
		return "Install capabilities (skills, plugins)"
	case strings.HasPrefix(tool, "git_"):
		return "Run " + tool
	}
	return "Execute " + tool + " on " + targetKey
}

// webFetchHost is the grant target of a web_fetch call: its URL's host and
// port, lower-cased, so one grant covers the pages of one host, not every
// private address.
func webFetchHost(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Host)
}
