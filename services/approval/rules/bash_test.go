package rules

import (
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

// bashClass is how the gate treats a bash command: runs without asking at
// normal autonomy, asks at normal (but not at yolo), or asks at every
// level.
type bashClass int

const (
	safe bashClass = iota
	asks
	critical
)

func (c bashClass) String() string { return [...]string{"safe", "asks", "critical"}[c] }

func classify(command string) bashClass {
	args := bash(command)
	switch {
	case IsCriticalNeverAutopass(ToolBash, args):
		return critical
	case NeedsConfirmation(ToolBash, args):
		return asks
	}
	return safe
}

// TestBashClassifier: the verdict comes from the parsed command, so what
// follows a harmless-looking start decides.
func TestBashClassifier(t *testing.T) {
	tests := []struct {
		cmd  string
		want bashClass
	}{
		// Read-only commands, literal words, quotes and escapes.
		{"ls", safe}, {"ls -la", safe}, {"ls -la src/", safe}, {"ls *.go", safe}, {"cat 'my file.txt'", safe},
		{`cat "a b"`, safe}, {`l\s`, safe}, {"'ls' -la", safe}, {"echo hello world", safe},
		{"echo 'a;b' \"c && d\"", safe}, {"echo '$(rm -rf x)'", safe}, {"pwd", safe}, {"whoami", safe},
		{"env", safe}, {"printenv HOME", safe}, {"uname -a", safe}, {"date -u", safe}, {"hostname", safe},
		{"hostname -I", safe}, {"find . -name '*.go' -type f", safe}, {"find src -maxdepth 2 -print", safe},
		{"git status --short", safe}, {"git log -n 5 --oneline", safe}, {"git diff HEAD~1 -- a.go", safe},
		{"git show HEAD:README.md", safe}, {"git branch", safe}, {"git branch -a -v", safe},
		{"git branch --list 'feat*'", safe}, {"git tag", safe}, {"git tag -l 'v1.*'", safe},
		{"git remote -v", safe}, {"git remote show origin", safe}, {"node --version", safe},
		{"curl -sI https://example.test", safe}, {"curl --head --location https://example.test", safe},
		{"du -sh .", safe}, {"ps aux", safe}, {"wc -l a.txt b.txt", safe}, {"tail -n 20 log.txt", safe},
		{"ls # rm -rf x", safe},
		// Pipelines of safe stages; descriptor duplication.
		{"ls | wc -l", safe}, {"cat a.txt | head -n 3 | wc -c", safe}, {"ls 2>&1 | head", safe},
		{"git log |& head", safe},

		// Commands that run other commands.
		{"env sh -c 'touch pwned'", asks}, {"env X=1 ls", asks}, {"env -i ls", asks},
		{"xargs touch", asks}, {"ls | xargs rm", asks}, {"nice ls", asks}, {"nohup ls", asks},
		{"timeout 5 ls", asks}, {"time ls", asks}, {"exec ls", asks}, {"eval ls", asks},
		{"command ls", asks}, {"builtin echo x", asks}, {"watch ls", asks}, {"flock f ls", asks},
		{"parallel ls", asks}, {"strace ls", asks}, {"sh -c ls", asks}, {"bash -c 'echo hi'", asks},
		{"zsh -c ls", asks}, {"cat a | sh", asks}, {"source x.sh", asks}, {". x.sh", asks},
		// find actions.
		{"find . -exec touch pwned2 {} +", asks}, {"find . -exec touch pwned2 +", asks},
		{"find . -execdir rm {} ;", asks}, {"find . -ok rm {} \\;", asks}, {"find . -okdir rm {} \\;", asks},
		{"find . -delete", asks}, {"find . -fprint out", asks}, {"find . -fprintf out %p", asks},
		{"find . -fls out", asks}, {"find . -fprint0 out", asks}, {"find . -exe[c] touch x {} +", asks},
		{"find . -exe{c,} touch x {} +", asks},
		// Redirections.
		{"echo hi > pwned3", asks}, {"echo hi >> f", asks}, {"ls > /dev/null", asks}, {"ls &> f", asks},
		{"ls >& f", asks}, {"cat < f", asks}, {"cat <<< x", asks}, {"cat <<EOF\nx\nEOF", asks},
		{"ls >| f", asks}, {"echo x 1> f", asks},
		// Substitutions and expansions.
		{"echo $(touch x)", asks}, {"echo `touch x`", asks}, {"cat <(touch x)", asks},
		{"ls >(tee x)", asks}, {"echo $HOME", asks}, {"echo ${x:=y}", asks}, {"echo $((1+2))", asks},
		{`echo "$(touch x)"`, asks}, {`echo "${PATH}"`, asks}, {"echo ${x@P}", asks},
		// Control operators, background, assignments, negation, compound commands.
		{"ls; touch x", asks}, {"ls && touch x", asks}, {"ls || touch x", asks}, {"ls & touch x", asks},
		{"ls &", asks}, {"ls\ntouch x", asks}, {"ls\rtouch x", asks}, {"X=1 ls", asks}, {"PATH=. ls", asks},
		{"! ls", asks}, {"(ls)", asks}, {"{ ls; }", asks}, {"if true; then ls; fi", asks},
		{"for f in a; do ls; done", asks}, {"f() { ls; }", asks}, {"[[ -f x ]]", asks}, {"ls\x00", asks},
		// Arguments that turn a read-only program into a writing one.
		{"git branch new-branch", asks}, {"git branch -D main", asks}, {"git tag v1", asks},
		{"git tag -d v1", asks}, {"git remote add x y", asks}, {"git -c core.pager=sh log", asks},
		{"git diff --output=x", asks}, {"git log --ext-diff", asks}, {"git push", asks},
		{"git statuses", asks}, {"date -s 2020-01-01", asks}, {"date --set=x", asks},
		{"hostname evil", asks}, {"hostname -F f", asks}, {"curl https://x.test", asks},
		{"curl -I -o f https://x.test", asks}, {"curl -I -K cfg https://x.test", asks},
		{"curl -I file:///etc/passwd", asks}, {"wget --spider https://x.test", asks},
		{"node app.js", asks}, {"python -c 'print(1)'", asks}, {"pip install x", asks},
		{"npm --version --foo", asks},
		// Not on the list, parse errors, nothing to judge.
		{"rm file", asks}, {"touch x", asks}, {"mkdir -p build", asks}, {"/bin/ls", asks}, {"LS", asks},
		{"lsblk", asks}, {"ls 'unterminated", asks}, {"ls )", asks}, {"", asks}, {"   ", asks},

		// Critical anywhere in the command, however written.
		{"rm -rf /", critical}, {"ls; rm -rf /", critical}, {"ls && rm -rf ~", critical},
		{"echo $(rm -rf /)", critical}, {"ls | sudo tee x", critical}, {"sudo ls", critical},
		{"env sudo ls", critical}, {"nice -n 5 sudo ls", critical}, {"xargs sudo rm", critical},
		{"/usr/bin/sudo ls", critical}, {"'sudo' ls", critical}, {`s\udo ls`, critical},
		{"sh -c 'sudo ls'", critical}, {`bash -c "rm -rf /"`, critical}, {"eval 'sudo ls'", critical},
		{"sh -c \"sh -c 'sudo x'\"", critical}, {"f() { sudo ls; }; f", critical}, {"doas ls", critical},
		{"su -c x", critical}, {"rm -r -f /", critical}, {`rm -rf "$HOME"`, critical}, {"rm -fr ~/", critical},
		{"rm --recursive /*", critical}, {"mkfs.ext4 /dev/sda1", critical}, {"MKFS /dev/sda", critical},
		{"dd if=/dev/zero of=/dev/sda", critical}, {"git push --force origin main", critical},
		{"git push -f origin master", critical}, {"git push origin +main", critical},
		{"git push origin HEAD:refs/heads/production --force", critical}, {":(){ :|:& };:", critical},
		{"format C:", critical}, {"reg delete HKLM\\x", critical},
		// Not critical: other targets, other branches.
		{"rm -rf ./build", asks}, {"rm -rf /tmp/x", asks}, {"rm -rf ~/project", asks},
		{"git push --force origin feature", asks}, {"git push origin main", asks}, {"pseudo x", asks},
		{"dd if=/dev/zero of=disk.img", asks},
	}
	for _, tc := range tests {
		if got := classify(tc.cmd); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.cmd, got, tc.want)
		}
	}
}

// TestBashCriticalAsksAtEveryLevel: a critical command asks at yolo too,
// wherever it is in the command.
func TestBashCriticalAsksAtEveryLevel(t *testing.T) {
	for _, cmd := range []string{"ls; rm -rf /", "env sudo ls", "echo `sudo ls`"} {
		for _, level := range []string{protocol.AutonomyNormal, protocol.AutonomyTrusted, protocol.AutonomyYolo} {
			if d := Decide(ToolBash, bash(cmd), level); d.Action != AskUser {
				t.Errorf("%q at %s: %v, want ask", cmd, level, d.Action)
			}
		}
	}
}

// TestBashTargetKey: a bash grant is about one command, compared on its
// parsed words.
func TestBashTargetKey(t *testing.T) {
	same := [][]string{
		{"ls -la", "ls  -la", " ls -la\n", "ls '-la'", `ls "-la"`, `l\s -la`},
		{"mkdir -p 'my dir'", `mkdir -p my\ dir`, `mkdir -p "my dir"`},
		{"ls | wc -l", "ls|wc   -l"},
	}
	for _, group := range same {
		want := BashTargetKey(group[0])
		for _, cmd := range group[1:] {
			if got := BashTargetKey(cmd); got != want {
				t.Errorf("BashTargetKey(%q) = %q, want %q (the key of %q)", cmd, got, want, group[0])
			}
		}
	}
	different := [][2]string{
		{"ls -la", "touch y"}, {"ls -la", "ls -la; touch y"}, {"ls -la", "ls -la > f"},
		{"rm '*'", "rm *"}, {"rm 'a b'", "rm a b"}, {`echo 'a\ b'`, `echo a\ b`},
		{"ls ~", "ls '~'"}, {"ls -la", "X=1 ls -la"}, {"ls -la", "ls -la &"},
		{"echo $(id)", "echo '$(id)'"}, {"ls (", "ls )"}, {"mkdir -p build", "mkdir -p build2"},
	}
	for _, pair := range different {
		if a, b := BashTargetKey(pair[0]), BashTargetKey(pair[1]); a == b {
			t.Errorf("%q and %q share the key %q", pair[0], pair[1], a)
		}
	}
	if got := BashTargetKey("ls   -la"); got != "ls -la" {
		t.Errorf("BashTargetKey(ls   -la) = %q, want the words", got)
	}
	if got := TargetKey(ToolBash, bash("mkdir  -p build")); got != "mkdir -p build" {
		t.Errorf("TargetKey(bash) = %q", got)
	}
}
