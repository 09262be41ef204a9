// Package chatcli is `waggle chat`: a terminal client of a waggle server's
// public HTTP API. On a terminal it is an interactive chat (streamed
// replies, steps and tools, approval prompts, slash-command completion,
// history, Ctrl-C cancels the running turn); with stdin from a pipe or a
// file it sends that one message, prints only the reply on stdout (steps
// on stderr) and exits 0 on done, 1 on error, so scripts can use it.
package chatcli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/waggle-os/core/services/gateway"
	"golang.org/x/term"
)

// Exit codes.
const (
	exitOK        = 0
	exitFailed    = 1 // the turn ended with an error, or the server refused
	exitUsage     = 2
	exitInterrupt = 130
)

// Options are the flags of `waggle chat`.
type Options struct {
	Server    string
	Workspace string
	Session   string
	Token     string
	Resume    string
}

// Main runs `waggle chat args` and returns its exit code. ctx ends on
// SIGINT/SIGTERM from outside; on a terminal, Ctrl-C arrives as a key
// instead and cancels only the running turn.
func Main(ctx context.Context, args []string, stdin *os.File, stdout, stderr io.Writer) int {
	opts, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "waggle chat: %v\n", err)
		return exitUsage
	}
	c := &client{base: strings.TrimRight(opts.Server, "/"), token: opts.Token, http: &http.Client{}}
	h, err := c.health(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "waggle chat: %v\n", err)
		return exitFailed
	}
	if c.token == "" {
		if h.Mode == "team" {
			fmt.Fprintln(stderr, "waggle chat: this is a team server: give your user token with --token or WAGGLE_TOKEN")
			return exitUsage
		}
		c.token = h.WSToken // local mode: the desktop token /health hands out
	}
	interactive := term.IsTerminal(int(stdin.Fd()))
	s := &chat{c: c, opts: opts}
	if interactive {
		return s.interactive(ctx, stdin, stdout)
	}
	return s.pipe(ctx, stdin, stdout, stderr)
}

func parse(args []string, out io.Writer) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("waggle chat", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.Server, "server", envOr("WAGGLE_SERVER", "http://"+gateway.DefaultAddr), "waggle server URL (env WAGGLE_SERVER)")
	fs.StringVar(&o.Workspace, "workspace", "default", "workspace id")
	fs.StringVar(&o.Session, "session", "", "session id (default: a new session)")
	fs.StringVar(&o.Token, "token", os.Getenv("WAGGLE_TOKEN"), "bearer token: a user token on a team server (env WAGGLE_TOKEN; locally /health's token is used)")
	fs.StringVar(&o.Resume, "resume", "", "follow a running turn by id (the X-Waggle-Turn-Id of its chat request) before chatting")
	fs.Usage = func() {
		fmt.Fprint(out, `Usage: waggle chat [flags]

Chat with a waggle server. On a terminal: Enter sends, Tab completes /commands,
arrow keys recall history, Ctrl-C cancels the running turn, Ctrl-D or /exit quits;
what you type during a reply waits for the next prompt (Enter in it sends it then);
approvals are asked as [a]llow once / al[w]ays / [d]eny.
With stdin from a pipe (echo hi | waggle chat): sends stdin as one message, prints
the reply on stdout and steps on stderr, exits 0 on done and 1 on error
(tool approvals are denied: nobody is there to answer them).

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (the message comes from stdin or the prompt)", fs.Arg(0))
	}
	if !strings.HasPrefix(o.Server, "http://") && !strings.HasPrefix(o.Server, "https://") {
		return o, fmt.Errorf("--server %q must be an http(s) URL", o.Server)
	}
	return o, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// chat is one client session against one server.
type chat struct {
	c    *client
	opts Options
	// typeahead holds the keys typed while a turn streamed (Ctrl-C
	// aside), in order, until the next prompt takes them.
	typeahead []byte
}

// send posts one message, creating the session first when none was given:
// a chat that never sends anything leaves no empty session behind.
func (s *chat) send(ctx context.Context, msg string) (string, *events, error) {
	if s.opts.Session == "" {
		id, err := s.c.newSession(ctx, s.opts.Workspace)
		if err != nil {
			// An ad-hoc workspace has no session list to add to; the chat
			// route creates the session on first use.
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
				return "", nil, err
			}
			id = "chat-" + randomID()
		}
		s.opts.Session = id
	}
	return s.c.chat(ctx, msg, s.opts.Workspace, s.opts.Session)
}

// pipe sends stdin as one message (or follows --resume) and reports the
// outcome in the exit code.
func (s *chat) pipe(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) int {
	p := &printer{reply: stdout, info: stderr}
	var (
		turnID string
		evs    *events
	)
	if s.opts.Resume != "" {
		turnID = s.opts.Resume
	} else {
		data, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintf(stderr, "waggle chat: reading stdin: %v\n", err)
			return exitFailed
		}
		msg := strings.TrimSpace(string(data))
		if msg == "" {
			fmt.Fprintln(stderr, "waggle chat: nothing to send (stdin was empty)")
			return exitUsage
		}
		if turnID, evs, err = s.send(ctx, msg); err != nil {
			fmt.Fprintf(stderr, "waggle chat: %v\n", err)
			return exitFailed
		}
	}
	deny := func(_ context.Context, a approval) decision {
		p.notice(fmt.Sprintf("approval needed for %s: denied (stdin is not a terminal; answer it interactively or in the web chat)", a.ToolName))
		return decideDeny
	}
	ok, err := s.stream(ctx, turnID, evs, p, nil, deny)
	switch {
	case ctx.Err() != nil:
		return exitInterrupt
	case err != nil:
		fmt.Fprintf(stderr, "waggle chat: %v\n", err)
		return exitFailed
	case !ok:
		return exitFailed
	}
	return exitOK
}
