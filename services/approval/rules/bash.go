package rules

import (
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Bash commands are judged on the parsed program (mvdan.cc/sh), never on a
// prefix of the text: "echo x > f", "env sh -c …" and "find … -exec" start
// like harmless commands and are not.
//
// A command runs without asking (at "normal" autonomy) only when it is one
// simple command, or a pipeline of them, in which every word is literal
// (quotes are fine; no $…, `…`, $(…), <(…), arithmetic or other
// expansion), with no redirection, no variable assignment, no background
// "&", no ";", "&&", "||" or newline between commands, and whose program and
// arguments are on the read-only list below. A pipeline is allowed because
// every one of its stages must pass on its own. Anything else, and a command
// that does not parse, asks.

// bashMaxDepth bounds how deep "sh -c '…'" and eval are followed when
// looking for a critical command inside another command's argument.
const bashMaxDepth = 4

// parseBash parses command as bash.
func parseBash(command string) (*syntax.File, error) {
	return syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
}

// bashWord is a word of a command as the shell would pass it, when that
// can be known without running anything.
type bashWord struct {
	// Text is the word after quote removal. For a word that is not
	// literal it is the word's source text with double quotes removed,
	// good enough for matching critical patterns like "$HOME".
	Text string
	// Literal: no expansion of any kind, so Text is exactly the argument.
	Literal bool
	// Pattern: an unquoted glob, brace or tilde character, so the shell may
	// turn the word into other words (file names).
	Pattern bool
}

// patternChars make an unquoted word subject to globbing or brace
// expansion (a leading ~ to tilde expansion).
const patternChars = "*?[]{}"

// wordOf reads w. A word is literal when it is made only of plain text and
// quotes whose contents are plain text.
func wordOf(w *syntax.Word) bashWord {
	out := bashWord{Literal: true}
	var src strings.Builder
	for i, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, patternChars) || i == 0 && strings.HasPrefix(p.Value, "~") {
				out.Pattern = true
			}
			src.WriteString(p.Value)
		case *syntax.SglQuoted:
			src.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if lit, ok := q.(*syntax.Lit); ok {
					src.WriteString(lit.Value)
					continue
				}
				out.Literal = false
				src.WriteString(printNode(q))
			}
		default:
			out.Literal = false
			src.WriteString(printNode(p))
		}
	}
	out.Text = src.String()
	if out.Literal {
		// Quote and escape removal as the shell does it ("l\s" is ls).
		if fields, err := expand.Fields(nil, w); err == nil && len(fields) == 1 {
			out.Text = fields[0]
		} else {
			out.Literal = false
		}
	}
	return out
}

// printNode is n's source text in the printer's canonical form.
func printNode(n syntax.Node) string {
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, n); err != nil {
		return ""
	}
	return b.String()
}

// callWords are the words of a simple command.
func callWords(c *syntax.CallExpr) []bashWord {
	words := make([]bashWord, len(c.Args))
	for i, w := range c.Args {
		words[i] = wordOf(w)
	}
	return words
}

// bashIsSafe reports whether command may run without approval at "normal"
// autonomy (see the package rule above). An empty command is not safe:
// there is nothing to judge.
func bashIsSafe(command string) bool {
	if strings.ContainsAny(command, "\r\x00") {
		// The parser and bash may not agree on these; ask.
		return false
	}
	f, err := parseBash(command)
	if err != nil || len(f.Stmts) != 1 {
		return false
	}
	return safeStmt(f.Stmts[0])
}

// safeStmt: a read-only simple command or a pipeline of them, with nothing
// around it.
func safeStmt(s *syntax.Stmt) bool {
	if s.Negated || s.Background || s.Coprocess || s.Disown || slices.ContainsFunc(s.Redirs, opensFile) {
		return false
	}
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		if len(c.Assigns) > 0 || len(c.Args) == 0 {
			return false
		}
		words := callWords(c)
		for _, w := range words {
			if !w.Literal {
				return false
			}
		}
		return safeProgram(words)
	case *syntax.BinaryCmd:
		return (c.Op == syntax.Pipe || c.Op == syntax.PipeAll) && safeStmt(c.X) && safeStmt(c.Y)
	}
	return false
}

// opensFile reports whether a redirection can open, create or write a file
// or run anything: every redirection but the duplication of a descriptor
// onto a numbered one ("2>&1", "<&3"). ">&file" names a file and counts.
func opensFile(r *syntax.Redirect) bool {
	if r.Op != syntax.DplOut && r.Op != syntax.DplIn {
		return true
	}
	w := wordOf(r.Word)
	return !w.Literal || w.Text == "" || strings.Trim(w.Text, "0123456789") != ""
}

// anyArgs are read-only programs whatever their arguments (they have no
// option that writes a file or runs a command).
var anyArgs = map[string]bool{
	"whoami": true, "pwd": true, "echo": true, "printenv": true, "uname": true, "id": true, "uptime": true,
	"ls": true, "dir": true, "where": true, "cat": true, "head": true, "tail": true, "wc": true, "which": true, "type": true,
	"df": true, "du": true, "free": true, "top": true, "ps": true, "netstat": true, "lsof": true,
}

// findActions are find's expressions that run a command, delete or write
// a file.
var findActions = map[string]bool{
	"-exec": true, "-execdir": true, "-ok": true, "-okdir": true, "-delete": true,
	"-fprint": true, "-fprint0": true, "-fprintf": true, "-fls": true,
}

// versionOnly are programs that are safe only as "<program> --version".
var versionOnly = map[string]bool{"node": true, "python": true, "python3": true, "npm": true, "npx": true, "pip": true}

// hostnameReads are hostname's options that only print.
var hostnameReads = []string{"-f", "-s", "-i", "-I", "-d", "-a", "-A", "--fqdn", "--long", "--short",
	"--ip-address", "--all-ip-addresses", "--domain", "--alias", "--all-fqdns"}

// safeProgram judges a simple command's literal words: the program, then
// what its arguments make it do.
func safeProgram(words []bashWord) bool {
	name, args := words[0].Text, words[1:]
	if anyArgs[name] {
		return true
	}
	// Past this point arguments decide; a word the shell may expand into
	// other words (a glob matching a file called "-exec") is not judged.
	texts := make([]string, len(args))
	for i, a := range args {
		if a.Pattern {
			return false
		}
		texts[i] = a.Text
	}
	switch {
	case name == "env":
		return len(texts) == 0 // with arguments env runs a command
	case name == "date":
		for _, a := range texts {
			if strings.HasPrefix(a, "--set") || strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "s") {
				return false
			}
		}
		return true
	case name == "hostname":
		return allIn(texts, hostnameReads)
	case name == "find":
		return !slices.ContainsFunc(texts, func(a string) bool { return findActions[a] })
	case name == "git":
		return len(texts) > 0 && safeGit(texts[0], texts[1:])
	case versionOnly[name]:
		return len(texts) == 1 && texts[0] == "--version"
	case name == "curl":
		return safeCurl(texts)
	}
	return false
}

// safeGit allows git's inspecting subcommands in their listing forms. No
// option may come before the subcommand (git -c can run any command).
func safeGit(sub string, args []string) bool {
	switch sub {
	case "status":
		return true
	case "log", "show", "diff":
		// --output writes a file; external diff and textconv drivers run
		// configured commands.
		return !slices.ContainsFunc(args, func(a string) bool {
			return strings.HasPrefix(a, "--output") || strings.HasPrefix(a, "--ext-diff") || strings.HasPrefix(a, "--textconv")
		})
	case "branch":
		return listingOnly(args, []string{"-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose",
			"--show-current", "--color", "--no-color", "--column", "--no-column"})
	case "tag":
		return listingOnly(args, []string{"-n"})
	case "remote":
		return len(args) == 0 || allIn(args, []string{"-v", "--verbose"}) ||
			args[0] == "show" || args[0] == "get-url"
	}
	return false
}

// listingOnly: every option is in reads or -l/--list, and names (which
// would create or delete a branch or tag) appear only with -l/--list,
// where they are patterns.
func listingOnly(args []string, reads []string) bool {
	list := slices.Contains(args, "-l") || slices.Contains(args, "--list")
	for _, a := range args {
		switch {
		case a == "-l" || a == "--list" || slices.Contains(reads, a):
		case strings.HasPrefix(a, "-"):
			return false
		case !list:
			return false
		}
	}
	return true
}

// safeCurl allows a HEAD request: -I/--head with only output-neutral
// options and http(s) URLs (no -o, no config file, no upload).
func safeCurl(args []string) bool {
	head := false
	for _, a := range args {
		switch {
		case a == "--head":
			head = true
		case a == "--silent" || a == "--show-error" || a == "--location" || a == "--insecure":
		case strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 1 &&
			strings.Trim(a[1:], "IsSLk") == "":
			head = head || strings.Contains(a, "I")
		case strings.HasPrefix(a, "http://") || strings.HasPrefix(a, "https://"):
		default:
			return false
		}
	}
	return head
}

// allIn reports whether every element of args is in set.
func allIn(args, set []string) bool {
	for _, a := range args {
		if !slices.Contains(set, a) {
			return false
		}
	}
	return true
}

// bashIsCritical reports whether the parsed command runs a critical
// program anywhere: in any statement, pipeline stage, substitution,
// function body, after a command that runs another (env, xargs, nice,
// timeout…: every word is tried as a program) or inside "sh -c '…'" and
// eval. A command that does not parse is judged by the text patterns
// alone (criticalBash).
func bashIsCritical(command string, depth int) bool {
	f, err := parseBash(command)
	if err != nil || depth > bashMaxDepth {
		return false
	}
	critical := false
	syntax.Walk(f, func(n syntax.Node) bool {
		c, ok := n.(*syntax.CallExpr)
		if !ok || critical {
			return !critical
		}
		words := callWords(c)
		texts := make([]string, len(words))
		for i, w := range words {
			texts[i] = w.Text
		}
		for i := range texts {
			if criticalAt(texts[i:], depth) {
				critical = true
				break
			}
		}
		return !critical
	})
	return critical
}

// privileged programs run commands as another user.
var privileged = map[string]bool{"sudo": true, "su": true, "doas": true, "pkexec": true}

// rootTargets are what "rm -r"/"rm -f" must never get without asking.
var rootTargets = map[string]bool{
	"/": true, "/*": true, "/.": true, "~": true, "~/": true, "~/*": true,
	"$HOME": true, "${HOME}": true, "$HOME/": true, "${HOME}/": true, "$HOME/*": true, "${HOME}/*": true,
}

// criticalAt reports whether words, taken as a command, is critical.
func criticalAt(words []string, depth int) bool {
	name, args := path.Base(words[0]), words[1:]
	lower := strings.ToLower(name)
	switch {
	case privileged[name]:
		return true
	case lower == "mkfs" || strings.HasPrefix(lower, "mkfs."):
		return true
	case name == "rm":
		return rmForced(args) && slices.ContainsFunc(args, func(a string) bool { return rootTargets[a] })
	case name == "dd":
		return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "of=/dev/") })
	case lower == "git":
		return forcePushProtected(args)
	case lower == "format":
		return len(args) > 0 && len(args[0]) >= 2 && args[0][1] == ':' && isLetter(args[0][0])
	case lower == "reg":
		return len(args) > 0 && strings.EqualFold(args[0], "delete")
	case name == "eval":
		return bashIsCritical(strings.Join(args, " "), depth+1)
	case isShell(name):
		for i, a := range args {
			if a == "-c" && i+1 < len(args) {
				return bashIsCritical(args[i+1], depth+1)
			}
		}
	}
	return false
}

// rmForced: a recursive or forced rm (-r, -R, -f in any cluster, or the
// long forms).
func rmForced(args []string) bool {
	for _, a := range args {
		switch {
		case a == "--recursive" || a == "--force" || a == "--no-preserve-root":
			return true
		case strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsAny(a, "rRf"):
			return true
		}
	}
	return false
}

// forcePushProtected: git push with a force option naming a protected
// branch (also as the destination of a refspec, or with +).
func forcePushProtected(args []string) bool {
	if !slices.ContainsFunc(args, func(a string) bool { return strings.EqualFold(a, "push") }) {
		return false
	}
	force, protected := false, false
	for _, a := range args {
		l := strings.ToLower(a)
		switch {
		case strings.HasPrefix(l, "--force"):
			force = true
		case strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "--") && strings.Contains(l, "f"):
			force = true
		}
		if strings.HasPrefix(l, "+") {
			force = true
			l = l[1:]
		}
		if i := strings.LastIndexByte(l, ':'); i >= 0 {
			l = l[i+1:]
		}
		l = strings.TrimPrefix(l, "refs/heads/")
		if protectedBranches[l] {
			protected = true
		}
	}
	return force && protected
}

// isShell reports whether name is a shell that takes "-c command".
func isShell(name string) bool {
	switch path.Base(name) {
	case "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "busybox":
		return true
	}
	return false
}

func isLetter(b byte) bool { return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }

// BashTargetKey is the target an "always allow" grant for a bash command is
// stored under: the command itself, compared on its parsed words. A simple
// command of literal words is its words, each quoted canonically (so
// "ls  -la" and ls '-la' are the same command); any other command is the
// printer's canonical form of its syntax tree; a command that does not
// parse is its trimmed text. A grant covers only the command it was given
// for.
func BashTargetKey(command string) string {
	command = strings.TrimSpace(command)
	f, err := parseBash(command)
	if err != nil {
		return command
	}
	if key, ok := simpleKey(f); ok {
		return key
	}
	return strings.TrimSpace(printNode(f))
}

// simpleKey is the quoted words of a file that is one plain simple command
// of literal words.
func simpleKey(f *syntax.File) (string, bool) {
	if len(f.Stmts) != 1 {
		return "", false
	}
	s := f.Stmts[0]
	c, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || s.Negated || s.Background || s.Coprocess || s.Disown || len(s.Redirs) > 0 || len(c.Assigns) > 0 || len(c.Args) == 0 {
		return "", false
	}
	quoted := make([]string, len(c.Args))
	for i, w := range callWords(c) {
		if !w.Literal || w.Pattern {
			return "", false
		}
		q, err := syntax.Quote(w.Text, syntax.LangBash)
		if err != nil {
			return "", false
		}
		quoted[i] = q
	}
	return strings.Join(quoted, " "), true
}
