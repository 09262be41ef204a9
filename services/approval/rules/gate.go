// Package rules decides whether a tool call may run without a human
// approval: the original Waggle confirmation rules (which tools are always
// gated, which bash commands are harmless, which connector actions write),
// relaxed by the turn's autonomy level but never for the critical commands
// no level may wave through. It also owns the texts a turn shows for each
// outcome and the target keys that "always allow" grants are stored under.
//
// Everything here is pure: no I/O, no clock, safe for concurrent use.
package rules

import (
	"regexp"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
)

// Tool names with rules of their own.
const (
	ToolBash                   = "bash"
	ToolWriteFile              = "write_file"
	ToolEditFile               = "edit_file"
	ToolGenerateDocx           = "generate_docx"
	ToolGitCommit              = "git_commit"
	ToolGitPush                = "git_push"
	ToolGitPR                  = "git_pr"
	ToolGitMerge               = "git_merge"
	ToolInstallCapability      = "install_capability"
	ToolReadOtherWorkspace     = "read_other_workspace"
	ToolListWorkspaceFiles     = "list_workspace_files"
	ToolReadOtherWorkspaceFile = "read_other_workspace_file"
	ToolWebFetch               = "web_fetch"
	ToolGitBranch              = "git_branch"
	ToolGenerateXlsx           = "generate_xlsx"
)

// connectorPrefix starts the name of every connector tool:
// connector_<id>_<action>.
const connectorPrefix = "connector_"

// alwaysConfirm is the original ALWAYS_CONFIRM list: tools that write,
// publish, install or cross workspace boundaries.
var alwaysConfirm = map[string]bool{
	ToolWriteFile:              true,
	ToolEditFile:               true,
	ToolGenerateDocx:           true,
	ToolGenerateXlsx:           true,
	ToolGitCommit:              true,
	ToolGitPush:                true,
	ToolGitPR:                  true,
	ToolGitMerge:               true,
	ToolInstallCapability:      true,
	ToolReadOtherWorkspace:     true,
	ToolListWorkspaceFiles:     true,
	ToolReadOtherWorkspaceFile: true,
}

// trustedAutopass are the gated tools the "trusted" level runs without
// asking (bash too, unless critical); publishing, installing and listing
// another workspace still ask.
var trustedAutopass = map[string]bool{
	ToolWriteFile:              true,
	ToolEditFile:               true,
	ToolGenerateDocx:           true,
	ToolReadOtherWorkspace:     true,
	ToolReadOtherWorkspaceFile: true,
	ToolBash:                   true,
	ToolGitBranch:              true,
	ToolGenerateXlsx:           true,
}

// connectorWrite marks connector tools whose name says they change
// something. Underscores on both sides are required, so an action at the
// very end of the name (connector_slack_post) is not caught: the original
// behaves so and connector tool names always carry an object after the verb.
var connectorWrite = regexp.MustCompile(`_(create|update|delete|send|post|transition|remove|add|set|put)_`)

// jsRegexp compiles a JavaScript pattern with JavaScript's \s and . meaning.
func jsRegexp(src string) *regexp.Regexp { return regexp.MustCompile(translateJS(src)) }

// criticalBash are text patterns of commands that stay gated at every
// autonomy level. They are a second net under the parsed check
// (bashIsCritical), which finds the same commands however they are quoted
// or wrapped; the patterns also catch commands that do not parse.
var criticalBash = []*regexp.Regexp{
	jsRegexp(`\brm\s+-[rf]+\s*[\/~]\s*(?:$|\s)`),
	jsRegexp(`\brm\s+-[rf]+\s+\$HOME`),
	jsRegexp(`\brm\s+-[rf]+\s+\/\*`),
	jsRegexp(`\bsudo\b`),
	jsRegexp(`(?i)\bformat\s+[a-z]:\b`),
	jsRegexp(`\bmkfs\b`),
	jsRegexp(`(?i)\breg\s+delete\b`),
	jsRegexp(`\bdd\s+if=.*of=\/dev`),
	jsRegexp(`(?i)\bgit\s+push\s+.*--force.*\b(main|master|production)\b`),
	// The original wrote this with a leading \b, which needs a word
	// character before the colon and so never matched the fork bomb as
	// typed (":(){ :|:& };:"); the boundary is dropped here.
	jsRegexp(`:\(\)\{\s*:\|:&\s*\}\s*;:`),
}

// protectedBranches may not be force-pushed without approval at any level.
var protectedBranches = map[string]bool{"main": true, "master": true, "production": true}

// NeedsConfirmation is the base rule: whether the call needs a human
// approval before any autonomy level is taken into account.
func NeedsConfirmation(tool string, args map[string]any) bool {
	if _, _, ok := protocol.ParseMCPToolName(tool); ok {
		// An MCP server is third-party code: nothing about a tool's name
		// says it only reads, so every call asks (per-server trust, decided
		// by the runner that knows the config, skips the gate instead).
		return true
	}
	if strings.HasPrefix(tool, connectorPrefix) {
		return connectorNeedsConfirmation(tool)
	}
	if alwaysConfirm[tool] {
		return true
	}
	if tool == ToolWebFetch {
		// Reading the web only reads; a fetch asks when the turn runner,
		// which resolved the URL's host before asking, marked it _private:
		// a loopback, link-local, private or metadata address, the user's
		// own network rather than the web. The model cannot set the mark
		// (the tool's decoding refuses the key).
		return truthy(args["_private"])
	}
	if tool == ToolGitBranch {
		// Listing branches only reads; creating, switching and deleting
		// change the repository the user works in.
		return argString(args, "action") != "list"
	}
	if tool != ToolBash {
		return false
	}
	return !bashIsSafe(argString(args, "command"))
}

// connectorNeedsConfirmation gates connector calls that send or change data.
func connectorNeedsConfirmation(tool string) bool {
	// connector_<id>_<action…>: the action is everything after the id.
	var action string
	if parts := strings.Split(tool, "_"); len(parts) > 2 {
		action = strings.Join(parts[2:], "_")
	}
	if action == "send_email" || action == "send_template" {
		return true
	}
	return connectorWrite.MatchString(tool)
}

// IsCriticalNeverAutopass reports whether the call is dangerous enough that
// no autonomy level and no saved grant may skip the approval: destructive
// or privileged shell commands (anywhere in the parsed command), a
// high-risk capability install, a force push to a protected branch.
func IsCriticalNeverAutopass(tool string, args map[string]any) bool {
	switch tool {
	case ToolBash:
		command := argString(args, "command")
		for _, re := range criticalBash {
			if re.MatchString(command) {
				return true
			}
		}
		return bashIsCritical(command, 0)
	case ToolInstallCapability:
		risk, _ := args["_riskLevel"].(string)
		return risk == "high"
	case ToolGitPush:
		return truthy(args["force"]) && protectedBranches[strings.ToLower(argString(args, "branch"))]
	}
	return false
}

// normalLevel maps anything but the two relaxed levels to "normal", so an
// unknown or misspelt level never relaxes the gate.
func normalLevel(level string) string {
	if level == protocol.AutonomyTrusted || level == protocol.AutonomyYolo {
		return level
	}
	return protocol.AutonomyNormal
}

// NeedsConfirmationWithAutonomy applies the autonomy level (protocol.Autonomy*)
// to the base rule: "normal" asks whenever the base rule does; "yolo" asks
// only for critical calls; "trusted" also asks for publishing (git commit,
// push, PR, merge), installs, listing another workspace's files and gated
// connector calls.
func NeedsConfirmationWithAutonomy(tool string, args map[string]any, level string) bool {
	if !NeedsConfirmation(tool, args) {
		return false
	}
	switch level = normalLevel(level); {
	case level == protocol.AutonomyNormal, IsCriticalNeverAutopass(tool, args):
		return true
	case level == protocol.AutonomyYolo:
		return false
	}
	return !trustedAutopass[tool]
}

// Action is what the gate says to do with a tool call.
type Action int

const (
	// RunSilently runs the call with no step shown: it never needed approval.
	RunSilently Action = iota
	// RunAutoApproved runs the call and shows Decision.Step: approval would
	// have been asked at "normal" but the autonomy level waived it.
	RunAutoApproved
	// AskUser needs a saved grant or a human approval before the call runs.
	AskUser
)

// String names the action for logs.
func (a Action) String() string {
	switch a {
	case RunSilently:
		return "run"
	case RunAutoApproved:
		return "auto-approved"
	case AskUser:
		return "ask"
	}
	return "unknown"
}

// Decision is the gate's verdict on one tool call.
type Decision struct {
	Action Action
	// Step is the step text to emit before running; set for RunAutoApproved.
	Step string
}

// Decide gives the verdict for a call at an autonomy level. Saved grants
// and the test-mode switch are the caller's business: they only matter
// when the verdict is AskUser.
func Decide(tool string, args map[string]any, level string) Decision {
	if NeedsConfirmationWithAutonomy(tool, args, level) {
		return Decision{Action: AskUser}
	}
	level = normalLevel(level)
	if level != protocol.AutonomyNormal && NeedsConfirmation(tool, args) {
		return Decision{Action: RunAutoApproved, Step: StepAutoApproved(tool, level)}
	}
	return Decision{Action: RunSilently}
}
