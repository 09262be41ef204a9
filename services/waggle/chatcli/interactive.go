package chatcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"golang.org/x/term"
)

// interactive is the terminal chat. The terminal is in raw mode, so every
// key (Ctrl-C included) arrives as input: one reader goroutine feeds them
// to the line editor at the prompt and to the turn while one runs.
func (s *chat) interactive(ctx context.Context, stdin *os.File, stdout io.Writer) int {
	fd := int(stdin.Fd())
	old, err := term.MakeRaw(fd)
	if err != nil {
		fmt.Fprintf(stdout, "waggle chat: terminal: %v\n", err)
		return exitFailed
	}
	defer term.Restore(fd, old)

	// The reader lives as long as stdin: a read cannot be interrupted, and
	// the process exits when the chat does.
	keys := make(chan byte, 64)
	go func() {
		defer close(keys)
		buf := make([]byte, 256)
		for {
			n, err := stdin.Read(buf)
			for _, b := range buf[:n] {
				keys <- b
			}
			if err != nil {
				return
			}
		}
	}()

	kr := &keyReader{keys: keys}
	t := term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{kr, stdout}, "you> ")
	if w, h, err := term.GetSize(fd); err == nil && w > 0 && h > 0 { // a pty may report 0x0
		_ = t.SetSize(w, h)
	}
	p := &printer{reply: t, info: t, shared: true, color: true}
	if cmds, err := s.c.commands(ctx); err == nil {
		t.AutoCompleteCallback = completer(cmds)
	} else {
		p.notice("no command completion: " + err.Error())
	}
	session := s.opts.Session
	if session == "" {
		session = "new (created with the first message)"
	}
	p.notice(fmt.Sprintf("%s · workspace %s · session %s — Ctrl-C cancels a reply, Ctrl-D quits", s.c.base, s.opts.Workspace, session))
	ask := func(ctx context.Context, a approval) decision { return askKey(ctx, t, keys) }

	if s.opts.Resume != "" {
		if _, err := s.stream(ctx, s.opts.Resume, nil, p, keys, ask); err != nil {
			p.line("✖ " + err.Error())
		}
	}
	for {
		// Keys typed during the last turn come first, as if typed here:
		// text waits in the line, an Enter among them sends it.
		kr.unread(s.typeahead)
		s.typeahead = nil
		line, err := t.ReadLine()
		if errors.Is(err, io.EOF) {
			// Not through t: the editor would draw its prompt again.
			fmt.Fprint(stdout, "\r\n")
			return exitOK
		}
		if err != nil {
			return exitFailed
		}
		if ctx.Err() != nil {
			return exitInterrupt
		}
		line = strings.TrimSpace(line)
		switch line {
		case "":
			continue
		case "/exit", "/quit":
			return exitOK
		}
		fresh := s.opts.Session == ""
		turnID, evs, err := s.send(ctx, line)
		if fresh && s.opts.Session != "" {
			p.notice("session " + s.opts.Session)
		}
		if err != nil {
			p.line("✖ " + err.Error())
			continue
		}
		if _, err := s.stream(ctx, turnID, evs, p, keys, ask); err != nil {
			if ctx.Err() != nil {
				return exitInterrupt
			}
			p.line("✖ " + err.Error())
		}
	}
}

// askKey prompts for an approval and waits for a, w or d (Ctrl-C cancels
// the turn instead).
func askKey(ctx context.Context, out io.Writer, keys <-chan byte) decision {
	fmt.Fprint(out, "  [a]llow once / al[w]ays / [d]eny: ")
	for {
		select {
		case <-ctx.Done():
			fmt.Fprint(out, "\n")
			return decideInterrupt
		case k, ok := <-keys:
			if !ok {
				fmt.Fprint(out, "deny\n")
				return decideDeny
			}
			switch k {
			case 'a', 'A':
				fmt.Fprint(out, "allow once\n")
				return decideOnce
			case 'w', 'W':
				fmt.Fprint(out, "always allow\n")
				return decideAlways
			case 'd', 'D':
				fmt.Fprint(out, "deny\n")
				return decideDeny
			case keyCtrlC:
				fmt.Fprint(out, "^C\n")
				return decideInterrupt
			}
		}
	}
}

// keyReader hands the line editor one key byte per Read, so it never
// buffers keys meant for a turn that starts after Enter. Ctrl-C at the
// prompt clears the line (as in a shell) instead of ending the program.
type keyReader struct {
	keys    <-chan byte
	pending []byte
}

// unread puts keys before those still to come from the terminal. They
// are given as typed: a Ctrl-C among them is not turned into a clear.
func (k *keyReader) unread(keys []byte) {
	if len(keys) > 0 {
		k.pending = append(append([]byte(nil), keys...), k.pending...)
	}
}

func (k *keyReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(k.pending) == 0 {
		b, ok := <-k.keys
		if !ok {
			return 0, io.EOF
		}
		if b == keyCtrlC {
			k.pending = []byte{5, 21} // Ctrl-E, Ctrl-U: to the end, erase the line
		} else {
			k.pending = []byte{b}
		}
	}
	p[0] = k.pending[0]
	k.pending = k.pending[1:]
	return 1, nil
}

// completer completes /commands (names and aliases from GET
// /api/commands) on Tab: a unique match completes with a space, several
// complete to their common prefix, and Tab again cycles through them.
func completer(cmds []command) func(string, int, rune) (string, int, bool) {
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name)
		names = append(names, c.Aliases...)
	}
	sort.Strings(names)
	var cycle []string
	var idx int
	return func(line string, pos int, key rune) (string, int, bool) {
		if key != '\t' {
			cycle = nil
			return "", 0, false
		}
		if cycle != nil && idx < len(cycle) && line == cycle[idx] {
			idx = (idx + 1) % len(cycle)
			return cycle[idx], len(cycle[idx]), true
		}
		cycle = nil
		head := line[:pos]
		if !strings.HasPrefix(head, "/") || strings.ContainsAny(head, " \t") {
			return "", 0, false
		}
		var m []string
		for _, n := range names {
			if strings.HasPrefix(n, head[1:]) {
				m = append(m, "/"+n)
			}
		}
		switch {
		case len(m) == 0:
			return "", 0, false
		case len(m) == 1:
			return m[0] + " ", len(m[0]) + 1, true
		}
		if cp := commonPrefix(m); len(cp) > len(head) {
			return cp, len(cp), true
		}
		cycle, idx = m, 0
		return m[0], len(m[0]), true
	}
}

func commonPrefix(ss []string) string {
	p := ss[0]
	for _, s := range ss[1:] {
		for !strings.HasPrefix(s, p) {
			p = p[:len(p)-1]
		}
	}
	return p
}
