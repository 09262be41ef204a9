package rules

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

func bash(cmd any) map[string]any { return map[string]any{"command": cmd} }

func TestNeedsConfirmationTools(t *testing.T) {
	tests := []struct {
		tool string
		args map[string]any
		want bool
	}{
		// ALWAYS_CONFIRM, whatever the arguments.
		{ToolWriteFile, map[string]any{"path": "a.txt"}, true},
		{ToolEditFile, nil, true},
		{ToolGenerateDocx, nil, true},
		{ToolGenerateXlsx, nil, true},
		{"read_document", map[string]any{"path": "a.pdf"}, false},
		{ToolGitCommit, nil, true},
		{ToolGitPush, nil, true},
		{ToolGitPR, nil, true},
		{ToolGitMerge, nil, true},
		{ToolInstallCapability, map[string]any{"name": "x"}, true},
		{ToolReadOtherWorkspace, nil, true},
		{ToolListWorkspaceFiles, nil, true},
		{ToolReadOtherWorkspaceFile, nil, true},
		// Everything else that is not bash or a connector runs.
		{"read_file", map[string]any{"path": "/etc/passwd"}, false},
		{"web_search", nil, false},
		// web_fetch reads the web freely; an address the runner found
		// private asks.
		{ToolWebFetch, map[string]any{"url": "https://example.org/"}, false},
		{ToolWebFetch, map[string]any{"url": "http://127.0.0.1/", "_private": true, "_addresses": []any{"127.0.0.1"}}, true},
		{"git_status", nil, false},
		{"git_diff", map[string]any{"staged": true}, false},
		{"git_log", nil, false},
		// git_branch asks unless it only lists.
		{ToolGitBranch, map[string]any{"action": "list"}, false},
		{ToolGitBranch, map[string]any{"action": "create", "name": "x"}, true},
		{ToolGitBranch, map[string]any{"action": "delete", "name": "x"}, true},
		{ToolGitBranch, nil, true},
		{"save_memory", nil, false},
		{"", nil, false},
		{"Write_File", nil, false}, // names are case-sensitive
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			if got := NeedsConfirmation(tc.tool, tc.args); got != tc.want {
				t.Fatalf("NeedsConfirmation(%q) = %v, want %v", tc.tool, got, tc.want)
			}
		})
	}
}

func TestNeedsConfirmationConnectors(t *testing.T) {
	tests := []struct {
		tool string
		want bool
	}{
		{"connector_gmail_send_email", true},
		{"connector_sendgrid_send_template", true},
		{"connector_github_create_issue", true},
		{"connector_jira_update_ticket", true},
		{"connector_jira_transition_issue", true},
		{"connector_drive_delete_file", true},
		{"connector_slack_send_message", true},
		{"connector_slack_post_message", true},
		{"connector_x_remove_member", true},
		{"connector_x_add_label", true},
		{"connector_x_set_status", true},
		{"connector_x_put_object", true},
		{"connector_github_list_issues", false},
		{"connector_github_get_issue", false},
		{"connector_slack_post", false},                // verb at the end: no trailing underscore
		{"connector_github_issue_create", false},       // same
		{"connector_x_Create_issue", false},            // case-sensitive
		{"connector_x_search_created_items", false},    // "_created_" is not "_create_"
		{"connector_add_list_items", true},             // the id itself can look like a verb
		{"connector_gmail", false},                     // no action at all
		{"connector_gmail_send_email_draft", true},     // _send_ still matches
		{"myconnector_gmail_send_email", false},        // not a connector, not gated
		{"connector_write_file_read", false},           // connector rules win over ALWAYS_CONFIRM names
		{"connector_x_fetch_emails_to_send", false},    // _send at the end
		{"connector_outlook_send_email", true},         // action rule
		{"connector_outlook_send_template_copy", true}, // _send_
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			if got := NeedsConfirmation(tc.tool, nil); got != tc.want {
				t.Fatalf("NeedsConfirmation(%q) = %v, want %v", tc.tool, got, tc.want)
			}
		})
	}
}

func TestNeedsConfirmationBash(t *testing.T) {
	tests := []struct {
		name string
		cmd  any
		want bool
	}{
		// Every safe pattern, every alternative.
		{"date", "date", false}, {"whoami", "whoami", false}, {"hostname", "hostname -f", false},
		{"pwd", "pwd", false}, {"echo", "echo hello", false}, {"printenv", "printenv PATH", false},
		{"env", "env", false}, {"uname", "uname -a", false}, {"id", "id -u", false}, {"uptime", "uptime", false},
		{"ls", "ls -la", false}, {"dir", "dir", false}, {"cat", "cat README.md", false},
		{"head", "head -n 5 a", false}, {"tail", "tail -f log", false}, {"wc", "wc -l a", false},
		{"find", "find . -name '*.go'", false}, {"which", "which go", false}, {"where", "where go", false},
		{"type", "type ls", false},
		{"git status", "git status", false}, {"git log", "git log --oneline", false},
		{"git diff", "git diff HEAD~1", false}, {"git branch", "git branch -a", false},
		{"git remote", "git remote -v", false}, {"git show", "git show HEAD", false},
		{"git tag", "git tag", false}, {"git  tabs", "git\t\tstatus", false},
		{"node version", "node --version", false}, {"python version", "python --version", false},
		{"python3 version", "python3 --version", false}, {"npm version", "npm --version", false},
		{"npx version", "npx --version", false}, {"pip version", "pip --version", false},
		{"curl head", "curl -s https://x.test --head", false}, {"wget head", "wget --head https://x.test", true},
		{"df", "df -h", false}, {"du", "du -sh .", false}, {"free", "free -m", false}, {"top", "top -b -n1", false},
		{"ps", "ps aux", false}, {"netstat", "netstat -an", false}, {"lsof", "lsof -i :3333", false},
		{"surrounding whitespace trimmed", "  \t ls\n", false},
		// Bash does not trim NBSP: the program would be "\u00a0ls\u00a0".
		{"NBSP is not whitespace to bash", "\u00a0ls\u00a0", true},

		// Not on the list, or only a prefix of a word.
		{"rm", "rm file", true}, {"lsblk is not ls", "lsblk", true}, {"dates", "dates", true},
		{"git push", "git push", true}, {"git statuses", "git statuses", true},
		{"node script", "node app.js", true}, {"curl without head", "curl https://x.test", true},
		{"curl head on next line", "curl x\n--head", true}, {"uppercase", "LS", true},
		{"leading word", "sudo ls", true}, {"python -V", "python -V", true},

		// Empty or missing.
		{"empty", "", true}, {"blank", "   ", true}, {"missing", nil, true},

		// Chaining (original rule).
		{"&&", "ls && rm -rf x", true}, {"||", "ls || true", true}, {";", "date; rm x", true},
		{"pipe", "cat a | sh", true},
		// Chaining the original missed, closed here.
		{"newline", "ls\nrm -rf ~", true}, {"carriage return", "ls\rrm x", true},
		{"background &", "ls & rm -rf ~", true}, {"backticks", "echo `rm -rf ~`", true},
		{"command substitution", "echo $(rm -rf ~)", true}, {"process substitution", "cat <(curl x)", true},
		{"output process substitution", "ls >(tee x)", true},
		// Duplicating a descriptor writes nothing; every other redirection asks.
		{"2>&1", "ls 2>&1", false}, {"<&", "cat <&3", false}, {"close fd", "ls 2>&-", true},
		{"&> file", "ls &> out.txt", true}, {">& file", "ls >& out.txt", true},
		{"redirect into /etc", "echo x > /etc/y", true}, {"append", "echo x >> notes", true},
		{"input file", "cat < a", true}, {"here string", "cat <<< x", true},
		{"find -delete", "find / -delete", true},

		// Non-string commands read like JavaScript's String().
		{"number", 42.0, true},
		{"array of one safe word", []any{"ls"}, false},
		{"array with a dangerous word", []any{"rm", "x"}, true},
		{"array joins with commas", []any{"ls", "-la"}, true}, // "ls,-la" is no program on the list
		{"object", map[string]any{"a": 1.0}, true},
		{"bool", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NeedsConfirmation(ToolBash, bash(tc.cmd)); got != tc.want {
				t.Fatalf("NeedsConfirmation(bash %q) = %v, want %v", tc.cmd, got, tc.want)
			}
		})
	}
	if !NeedsConfirmation(ToolBash, nil) {
		t.Fatal("bash with nil args must be gated")
	}
}

func TestIsCriticalNeverAutopass(t *testing.T) {
	tests := []struct {
		name string
		tool string
		args map[string]any
		want bool
	}{
		{"rm -rf /", ToolBash, bash("rm -rf /"), true},
		{"rm -rf / with more", ToolBash, bash("rm -rf / --no-preserve-root"), true},
		{"rm -fr ~", ToolBash, bash("rm -fr ~"), true},
		{"rm -r /  trailing", ToolBash, bash("rm -r / "), true},
		{"rm -rf /tmp/x is not root", ToolBash, bash("rm -rf /tmp/x"), false},
		{"rm -rf ~/project is not home", ToolBash, bash("rm -rf ~/project"), false},
		{"rm -rf $HOME", ToolBash, bash("rm -rf $HOME"), true},
		{"rm -rf /*", ToolBash, bash("rm -rf /*"), true},
		{"rm -rf ./build", ToolBash, bash("rm -rf ./build"), false},
		{"sudo", ToolBash, bash("sudo apt install x"), true},
		{"sudo inside", ToolBash, bash("echo hi && sudo reboot"), true},
		{"pseudo is not sudo", ToolBash, bash("pseudo x"), false},
		{"format c:", ToolBash, bash("format c:\\"), true}, // the parsed check finds what the pattern missed
		{"format C:drive", ToolBash, bash("FORMAT C:drive"), true},
		{"mkfs", ToolBash, bash("mkfs.ext4 /dev/sda1"), true},
		{"reg delete", ToolBash, bash("REG DELETE HKLM\\Software\\x"), true},
		{"dd to device", ToolBash, bash("dd if=/dev/zero of=/dev/sda bs=1M"), true},
		{"dd to file", ToolBash, bash("dd if=/dev/zero of=./disk.img"), false},
		{"force push main", ToolBash, bash("git push origin --force main"), true},
		{"force push master uppercase", ToolBash, bash("GIT PUSH -u origin --force MASTER"), true},
		{"force-with-lease production", ToolBash, bash("git push --force-with-lease origin production"), true},
		{"force push feature", ToolBash, bash("git push --force origin feature"), false},
		{"push main no force", ToolBash, bash("git push origin main"), false},
		{"fork bomb", ToolBash, bash(":(){ :|:& };:"), true},
		{"fork bomb tight", ToolBash, bash(":(){:|:&};:"), true},
		{"fork bomb after text", ToolBash, bash("x:(){ :|:& };:"), true},
		{"harmless bash", ToolBash, bash("ls -la"), false},
		{"bash without command", ToolBash, nil, false},
		{"install high", ToolInstallCapability, map[string]any{"name": "x", "_riskLevel": "high"}, true},
		{"install medium", ToolInstallCapability, map[string]any{"_riskLevel": "medium"}, false},
		{"install HIGH is not high", ToolInstallCapability, map[string]any{"_riskLevel": "HIGH"}, false},
		{"install no risk", ToolInstallCapability, nil, false},
		{"git_push force main", ToolGitPush, map[string]any{"force": true, "branch": "main"}, true},
		{"git_push force Master", ToolGitPush, map[string]any{"force": true, "branch": "Master"}, true},
		{"git_push force production", ToolGitPush, map[string]any{"force": "yes", "branch": "production"}, true},
		{"git_push force 1", ToolGitPush, map[string]any{"force": 1.0, "branch": "main"}, true},
		{"git_push force false", ToolGitPush, map[string]any{"force": false, "branch": "main"}, false},
		{"git_push force 0", ToolGitPush, map[string]any{"force": 0.0, "branch": "main"}, false},
		{"git_push force empty string", ToolGitPush, map[string]any{"force": "", "branch": "main"}, false},
		{"git_push force feature", ToolGitPush, map[string]any{"force": true, "branch": "feature"}, false},
		{"git_push no branch", ToolGitPush, map[string]any{"force": true}, false},
		{"write_file never critical", ToolWriteFile, map[string]any{"path": "/"}, false},
		{"sudo in another tool is not bash", "run_shell", bash("sudo x"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsCriticalNeverAutopass(tc.tool, tc.args); got != tc.want {
				t.Fatalf("IsCriticalNeverAutopass(%s, %v) = %v, want %v", tc.tool, tc.args, got, tc.want)
			}
		})
	}
}

func TestNeedsConfirmationWithAutonomy(t *testing.T) {
	const (
		normal  = protocol.AutonomyNormal
		trusted = protocol.AutonomyTrusted
		yolo    = protocol.AutonomyYolo
	)
	type want struct{ normal, trusted, yolo bool }
	tests := []struct {
		name string
		tool string
		args map[string]any
		want want
	}{
		{"ungated tool never asks", "read_file", nil, want{false, false, false}},
		{"safe bash never asks", ToolBash, bash("ls"), want{false, false, false}},
		{"write_file", ToolWriteFile, map[string]any{"path": "a"}, want{true, false, false}},
		{"edit_file", ToolEditFile, nil, want{true, false, false}},
		{"generate_docx", ToolGenerateDocx, nil, want{true, false, false}},
		{"read_other_workspace", ToolReadOtherWorkspace, nil, want{true, false, false}},
		{"read_other_workspace_file", ToolReadOtherWorkspaceFile, nil, want{true, false, false}},
		{"gated bash", ToolBash, bash("npm install"), want{true, false, false}},
		{"git_commit", ToolGitCommit, nil, want{true, true, false}},
		{"git_push", ToolGitPush, map[string]any{"branch": "main"}, want{true, true, false}},
		{"git_pr", ToolGitPR, nil, want{true, true, false}},
		{"git_merge", ToolGitMerge, nil, want{true, true, false}},
		{"install_capability", ToolInstallCapability, map[string]any{"_riskLevel": "low"}, want{true, true, false}},
		{"list_workspace_files", ToolListWorkspaceFiles, nil, want{true, true, false}},
		{"gated connector", "connector_gmail_send_email", nil, want{true, true, false}},
		{"ungated connector", "connector_gmail_list_emails", nil, want{false, false, false}},
		{"public web_fetch", ToolWebFetch, map[string]any{"url": "https://example.org/"}, want{false, false, false}},
		{"private web_fetch", ToolWebFetch, map[string]any{"url": "http://10.0.0.1/", "_private": true}, want{true, true, false}},
		// Critical calls ask at every level.
		{"sudo in yolo", ToolBash, bash("sudo rm x"), want{true, true, true}},
		{"rm -rf / in yolo", ToolBash, bash("rm -rf /"), want{true, true, true}},
		{"fork bomb in yolo", ToolBash, bash(":(){ :|:& };:"), want{true, true, true}},
		{"force push main in yolo", ToolBash, bash("git push --force origin main"), want{true, true, true}},
		{"high-risk install in yolo", ToolInstallCapability, map[string]any{"_riskLevel": "high"}, want{true, true, true}},
		{"git_push force main in yolo", ToolGitPush, map[string]any{"force": true, "branch": "main"}, want{true, true, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for level, w := range map[string]bool{normal: tc.want.normal, trusted: tc.want.trusted, yolo: tc.want.yolo} {
				if got := NeedsConfirmationWithAutonomy(tc.tool, tc.args, level); got != w {
					t.Errorf("level %s: got %v, want %v", level, got, w)
				}
			}
			for _, level := range []string{"", "YOLO", "admin"} {
				if got := NeedsConfirmationWithAutonomy(tc.tool, tc.args, level); got != tc.want.normal {
					t.Errorf("unknown level %q must act as normal: got %v", level, got)
				}
			}
		})
	}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name  string
		tool  string
		args  map[string]any
		level string
		want  Decision
	}{
		{"ungated at normal", "read_file", nil, protocol.AutonomyNormal, Decision{Action: RunSilently}},
		{"ungated at yolo stays silent", "read_file", nil, protocol.AutonomyYolo, Decision{Action: RunSilently}},
		{"safe bash at trusted stays silent", ToolBash, bash("ls"), protocol.AutonomyTrusted, Decision{Action: RunSilently}},
		{"gated at normal asks", ToolWriteFile, nil, protocol.AutonomyNormal, Decision{Action: AskUser}},
		{"write at trusted auto-approved", ToolWriteFile, nil, protocol.AutonomyTrusted,
			Decision{Action: RunAutoApproved, Step: "⚡ write_file auto-approved (trusted)"}},
		{"git_commit at yolo auto-approved", ToolGitCommit, nil, protocol.AutonomyYolo,
			Decision{Action: RunAutoApproved, Step: "⚡ git_commit auto-approved (yolo)"}},
		{"git_commit at trusted asks", ToolGitCommit, nil, protocol.AutonomyTrusted, Decision{Action: AskUser}},
		{"sudo at yolo asks", ToolBash, bash("sudo ls"), protocol.AutonomyYolo, Decision{Action: AskUser}},
		{"unknown level asks", ToolWriteFile, nil, "superuser", Decision{Action: AskUser}},
		{"mcp tool at normal asks", "mcp__fs__read_file", nil, protocol.AutonomyNormal, Decision{Action: AskUser}},
		{"mcp tool at trusted asks", "mcp__fs__read_file", nil, protocol.AutonomyTrusted, Decision{Action: AskUser}},
		{"mcp tool at yolo auto-approved", "mcp__fs__write_file", nil, protocol.AutonomyYolo,
			Decision{Action: RunAutoApproved, Step: "⚡ mcp__fs__write_file auto-approved (yolo)"}},
		{"malformed mcp name is an ordinary tool", "mcp__fs", nil, protocol.AutonomyNormal, Decision{Action: RunSilently}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.tool, tc.args, tc.level); got != tc.want {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestStepTexts(t *testing.T) {
	tests := []struct{ got, want string }{
		{StepAutoApproved("bash", "yolo"), "\u26a1 bash auto-approved (yolo)"},
		{StepTestMode("bash"), "\u2714 bash auto-approved (test mode)"},
		{StepGrant("write_file"), "\u2714 write_file allowed by saved grant"},
		{StepApproved("write_file"), "\u2714 write_file approved"},
		{StepDenied("git_push"), "\u2716 git_push denied by user"},
		{StepTimedOut("git_push"), "\u23f1 git_push approval timed out \u2014 denied"},
		{ModelTextDenied("git_push"), "[BLOCKED] User denied git_push"},
		{ModelTextTimedOut("git_push"), "[BLOCKED] Approval for git_push timed out"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if StepDenied("x") == StepTimedOut("x") || ModelTextDenied("x") == ModelTextTimedOut("x") {
		t.Fatal("a timeout must read differently from a user's deny")
	}
}

func TestTargetKey(t *testing.T) {
	tests := []struct {
		tool string
		args map[string]any
		want string
	}{
		{ToolWriteFile, map[string]any{"path": " src/a.go "}, "src/a.go"},
		{ToolWriteFile, map[string]any{"file_path": "b.txt"}, "b.txt"},
		{ToolWriteFile, map[string]any{"path": "a", "file_path": "b"}, "a"},
		{ToolWriteFile, map[string]any{"path": nil, "file_path": "b"}, "b"}, // null falls through like ??
		{ToolWriteFile, map[string]any{"path": "", "file_path": "b"}, "*"},  // "" does not
		{ToolWriteFile, map[string]any{"path": "   "}, "*"},
		{ToolWriteFile, nil, "*"},
		// A BOM is no space to the file tools: it stays part of the name.
		{ToolWriteFile, map[string]any{"path": "notes.txt\ufeff"}, "notes.txt\ufeff"},
		{ToolWriteFile, map[string]any{"path": " notes.txt\u00a0"}, "notes.txt"},
		{ToolEditFile, map[string]any{"path": "c.md"}, "c.md"},
		{ToolEditFile, map[string]any{"path": 7.0}, "7"},
		{ToolReadOtherWorkspace, map[string]any{"target_workspace_id": "team-b"}, "team-b"},
		{ToolReadOtherWorkspace, map[string]any{}, "*"},
		{ToolListWorkspaceFiles, map[string]any{"target_workspace_id": " ws1 "}, "ws1"},
		{ToolReadOtherWorkspaceFile, map[string]any{"target_workspace_id": "ws1", "path": "x"}, "*"},
		{ToolGenerateDocx, map[string]any{"path": "r.docx"}, "*"},
		{ToolGitPush, map[string]any{"branch": "main"}, "*"},
		{ToolInstallCapability, map[string]any{"name": "x"}, "*"},
		{ToolBash, bash("ls"), "ls"},
		{ToolBash, bash(""), "*"},
		{"connector_gmail_send_email", map[string]any{"to": "a@b"}, "*"},
		{"mcp__fs__read_file", map[string]any{"path": "a.txt"}, "fs/read_file"},
		{"mcp__git-hub__create__issue", nil, "git-hub/create__issue"},
		{"mcp__fs", map[string]any{"path": "a"}, "*"},
		{ToolWebFetch, map[string]any{"url": "http://LocalHost:8080/admin?x=1", "_private": true}, "localhost:8080"},
		{ToolWebFetch, map[string]any{"url": "http://[::1]/"}, "[::1]"},
		{ToolWebFetch, map[string]any{}, "*"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s %v", tc.tool, tc.args), func(t *testing.T) {
			if got := TargetKey(tc.tool, tc.args); got != tc.want {
				t.Fatalf("TargetKey = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDescribeGrant(t *testing.T) {
	ws := "alpha"
	empty := ""
	tests := []struct {
		tool, key string
		source    *string
		want      string
	}{
		{ToolReadOtherWorkspace, "beta", &ws, `Read workspace "beta" from "alpha"`},
		{ToolReadOtherWorkspace, "beta", nil, `Read workspace "beta"`},
		{ToolReadOtherWorkspace, "beta", &empty, `Read workspace "beta"`},
		{ToolListWorkspaceFiles, "beta", &ws, `List files in workspace "beta"`},
		{ToolWriteFile, "*", nil, "Write any file"},
		{ToolWriteFile, "src/a.go", nil, "Write to src/a.go"},
		{ToolEditFile, "*", &ws, "Write any file"},
		{ToolEditFile, "b.md", nil, "Write to b.md"},
		{ToolGenerateDocx, "*", nil, "Generate .docx documents"},
		{ToolInstallCapability, "*", nil, "Install capabilities (skills, plugins)"},
		{ToolGitCommit, "*", nil, "Run git_commit"},
		{ToolGitPush, "*", nil, "Run git_push"},
		{ToolGitPR, "*", nil, "Run git_pr"},
		{ToolGitMerge, "*", nil, "Run git_merge"},
		{ToolBash, "*", nil, "Run bash with no command"},
		{ToolBash, "ls -la", nil, "Run the command: ls -la"},
		{ToolWebFetch, "localhost:8080", nil, "Fetch web pages from localhost:8080 (a private address)"},
		{"mcp__fs__read_file", "fs/read_file", &ws, `Use read_file of MCP server "fs"`},
		{ToolReadOtherWorkspaceFile, "*", nil, "Execute read_other_workspace_file on *"},
		{"connector_gmail_send_email", "*", nil, "Execute connector_gmail_send_email on *"},
	}
	for _, tc := range tests {
		if got := DescribeGrant(tc.tool, tc.key, tc.source); got != tc.want {
			t.Errorf("DescribeGrant(%s, %s) = %q, want %q", tc.tool, tc.key, got, tc.want)
		}
	}
}

func TestJSString(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{nil, ""}, {"x", "x"}, {true, "true"}, {false, "false"},
		{1.0, "1"}, {-2.5, "-2.5"}, {0.0, "0"}, {1e21, "1e+21"}, {1.5e-7, "1.5e-7"}, {123456789012.0, "123456789012"},
		{json.Number("12"), "12"}, {[]any{"a", nil, 1.0}, "a,,1"}, {map[string]any{}, "[object Object]"},
	}
	for _, tc := range tests {
		if got := jsString(tc.in); got != tc.want {
			t.Errorf("jsString(%#v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTruthy(t *testing.T) {
	for v, want := range map[any]bool{
		nil: false, false: false, true: true, "": false, "false": true, 0.0: false, 2.0: true, json.Number("0"): false,
	} {
		if got := truthy(v); got != want {
			t.Errorf("truthy(%#v) = %v, want %v", v, got, want)
		}
	}
	if !truthy([]any{}) || !truthy(map[string]any{}) {
		t.Error("empty arrays and objects are truthy in JavaScript")
	}
}

func TestTranslateJS(t *testing.T) {
	tests := []struct{ in, want string }{
		{`a\sb`, `a` + jsSpaceClass + `b`},
		{`a.b`, `a` + jsDotClass + `b`},
		{`a\.b`, `a\.b`},
		{`[.\s]`, `[.\s]`},
		{`\\s`, `\\s`},
	}
	for _, tc := range tests {
		if got := translateJS(tc.in); got != tc.want {
			t.Errorf("translateJS(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
