package clients

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// agentModel answers like a small agent: "CALL <tool> <json>" gets that
// tool call, a tool result gets a closing reply, "HOLD" streams a first
// part and waits on hold (for Ctrl-C), "FAIL" is a model error, anything
// else is echoed back as "you said: …".
func agentModel(t *testing.T, hold *llmtest.Pause) *llmtest.Server {
	t.Helper()
	s := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		msgs := r.Chat.Messages
		last := msgs[len(msgs)-1]
		switch {
		case last.Role == "tool":
			return llmtest.Reply("tool said: ", last.Content)
		case strings.Contains(last.Content, "CALL "):
			resp, _ := llmtest.CallDirective(last.Content)
			return resp
		case strings.Contains(last.Content, "HOLD"):
			return llmtest.Response{Steps: []llmtest.Step{llmtest.Content("holding on"), llmtest.Wait(hold), llmtest.Content(" — released")}}
		case strings.Contains(last.Content, "FAIL"):
			return llmtest.ErrorStatus(http.StatusBadRequest, "the model refused")
		}
		return llmtest.Reply("you said: ", last.Content)
	}))
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func startApp(t *testing.T, llm *llmtest.Server) *waggletest.Server {
	t.Helper()
	return waggletest.Start(t, waggletest.WithLLM(llm.URL()), waggletest.WithConfig(func(c *app.Config) {
		c.Approval.Timeout = 30 * time.Second
	}))
}

// TestChatPipe: with stdin from a pipe, `waggle chat` prints only the reply
// on stdout, steps on stderr, and its exit code tells done from error.
func TestChatPipe(t *testing.T) {
	hold := llmtest.NewPause()
	defer hold.Release()
	llm := agentModel(t, hold)
	srv := startApp(t, llm)
	chat := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(waggleBin, append([]string{"chat", "--server", srv.URL}, args...)...)
		cmd.Env = baseEnv(t)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}

	code, out, errOut := chat("hello from a script\n", "--session", "pipe1")
	if code != 0 || out != "you said: hello from a script\n" {
		t.Fatalf("done: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if !strings.Contains(errOut, "· ") {
		t.Fatalf("no steps on stderr: %q", errOut)
	}
	var h struct {
		Messages []struct{ Role, Content string }
	}
	srv.JSON(http.MethodGet, "/api/history?workspace=default&session=pipe1", nil, &h)
	if len(h.Messages) != 2 || h.Messages[0].Content != "hello from a script" || h.Messages[1].Content != "you said: hello from a script" {
		t.Fatalf("history %+v", h.Messages)
	}

	// A turn that ends with an error event exits 1, with the reason on stderr.
	code, out, errOut = chat("please FAIL")
	if code != 1 || out != "" || !strings.Contains(errOut, "✖ ") {
		t.Fatalf("error event: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Rejected before any stream: exit 1 and the server's words.
	code, out, errOut = chat("hi", "--session", "no spaces allowed")
	if code != 1 || out != "" || !strings.Contains(errOut, "400 Invalid session: contains illegal characters") {
		t.Fatalf("rejected: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Nobody can answer an approval: it is denied and the turn goes on.
	code, out, errOut = chat(`CALL write_file {"path":"piped.txt","content":"x"}`)
	if code != 0 || !strings.Contains(errOut, "approval needed for write_file: denied") || !strings.Contains(out, "tool said: [BLOCKED] User denied write_file") {
		t.Fatalf("approval in a pipe: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(srv.DataDir, "workspaces", "default", "files", "piped.txt")); err == nil {
		t.Fatal("a denied write_file wrote its file")
	}
	// --resume follows a turn someone else started, from its first event.
	st := srv.Chat(map[string]any{"message": "please HOLD", "workspace": "default", "session": "pipe2"})
	turnID := st.Resp.Header.Get("X-Waggle-Turn-Id")
	hold.Release()
	if text := waggletest.Text(st.All(t)); text != "holding on — released" {
		t.Fatalf("the API client saw %q", text)
	}
	code, out, errOut = chat("", "--resume", turnID)
	if code != 0 || out != "holding on — released\n" {
		t.Fatalf("--resume: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut = chat("", "--resume", "no-such-turn"); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("--resume of an unknown turn: exit %d, stderr %q", code, errOut)
	}

	// Usage errors exit 2.
	if code, _, errOut = chat(""); code != 2 || !strings.Contains(errOut, "nothing to send") {
		t.Fatalf("empty stdin: exit %d, stderr %q", code, errOut)
	}
	if code, _, _ = chat("hi", "stray-argument"); code != 2 {
		t.Fatalf("stray argument: exit %d", code)
	}
	// No server: exit 1.
	cmd := exec.Command(waggleBin, "chat", "--server", "http://127.0.0.1:1")
	cmd.Env, cmd.Stdin = baseEnv(t), strings.NewReader("hi")
	if out, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "cannot reach") {
		t.Fatalf("no server: %v %s", err, out)
	}
}

// terminal is `waggle chat` running in a pty.
type terminal struct {
	t    *testing.T
	pty  *os.File
	out  *syncBuffer
	cmd  *exec.Cmd
	done chan struct{}
	pos  int // output offset already matched
}

func startTerminal(t *testing.T, args ...string) *terminal {
	t.Helper()
	cmd := exec.Command(waggleBin, append([]string{"chat"}, args...)...)
	cmd.Env = baseEnv(t)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{t: t, pty: f, out: newSyncBuffer(), cmd: cmd, done: make(chan struct{})}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				term.out.Write(buf[:n])
			}
			if err != nil {
				close(term.done)
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
	})
	return term
}

func (term *terminal) expect(text string) {
	term.t.Helper()
	term.pos = term.out.expect(term.t, term.pos, text)
}

func (term *terminal) send(keys string) {
	term.t.Helper()
	if _, err := term.pty.WriteString(keys); err != nil {
		term.t.Fatal(err)
	}
}

// TestChatTerminal drives the interactive chat in a pty: a turn, an
// approval answered at the prompt, Ctrl-C cancelling only the running
// turn, Tab completion of /commands, history, Ctrl-D to quit.
func TestChatTerminal(t *testing.T) {
	hold := llmtest.NewPause()
	defer hold.Release()
	llm := agentModel(t, hold)
	srv := startApp(t, llm)
	term := startTerminal(t, "--server", srv.URL, "--workspace", "default", "--session", "tty1")

	term.expect("session tty1")
	term.expect("you> ")
	term.send("hello terminal\r")
	term.expect("you said: hello terminal")
	term.expect("you> ")

	// An approval, answered with "a" at the prompt.
	term.send(`please CALL write_file {"path":"from-tty.txt","content":"typed"}` + "\r")
	term.expect("· Writing file: from-tty.txt") // steps and tool calls are shown
	term.expect("⚙ write_file {")
	term.expect("? write_file wants to run:")
	term.expect("[a]llow once / al[w]ays / [d]eny: ")
	term.send("a")
	term.expect("allow once")
	term.expect("tool said: ")
	term.expect("you> ")
	data, err := os.ReadFile(filepath.Join(srv.DataDir, "workspaces", "default", "files", "from-tty.txt"))
	if err != nil || string(data) != "typed" {
		t.Fatalf("approved write_file: %q %v", data, err)
	}

	// Ctrl-C cancels the running turn, and the chat goes on.
	term.send("please HOLD\r")
	term.expect("holding on")
	term.send("\x03")
	term.expect("cancelling the turn")
	term.expect("The turn was cancelled.")
	term.expect("you> ")
	reqs := llm.ChatRequests()
	select {
	case <-reqs[len(reqs)-1].Cancelled():
	case <-time.After(10 * time.Second):
		t.Fatal("Ctrl-C did not cancel the model request")
	}
	term.send("still here?\r")
	term.expect("you said: still here?")
	term.expect("you> ")

	// Tab completes a command from GET /api/commands (names and aliases):
	// to the common prefix of /catchup and /catch-up, then cycling.
	// Ctrl-C at the prompt only clears the line.
	term.send("/catc\t")
	term.expect("/catch")
	term.send("\t")
	term.expect("/catch-up")
	term.send("\t")
	term.expect("/catchup")
	term.send("\x03")
	// History: arrow up recalls the last message.
	term.send("\x1b[A")
	term.expect("still here?")
	term.send("\x03")

	term.send("\x04") // Ctrl-D on an empty line quits
	select {
	case <-term.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Ctrl-D did not quit:\n%s", term.out.String())
	}
	if err := term.cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// TestChatTeamToken: a team server needs a user token; without one `waggle
// chat` says so (exit 2), with --token it chats.
func TestChatTeamToken(t *testing.T) {
	natsAddr := waggletest.FreeAddr(t)
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pgtest.URL(t)
		c.Gateway.Auth = "required"
		c.NATSListen = natsAddr
	}))
	nc := srv.DialNATS()
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"})
	tok := waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "olga"})
	var ws struct{ ID string }
	if st := srv.JSON(http.MethodPost, "/api/workspaces", map[string]any{"name": "Acme Ops", "teamId": "acme"}, &ws,
		"Authorization", "Bearer "+tok.Token); st != 200 && st != 201 {
		t.Fatalf("create team workspace: %d", st)
	}
	run := func(env []string, args ...string) (int, string, string) {
		cmd := exec.Command(waggleBin, append([]string{"chat", "--server", srv.URL, "--workspace", ws.ID}, args...)...)
		cmd.Env, cmd.Stdin = env, strings.NewReader("hello team")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		_ = cmd.Run()
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}
	if code, _, errOut := run(baseEnv(t)); code != 2 || !strings.Contains(errOut, "--token or WAGGLE_TOKEN") {
		t.Fatalf("no token: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := run(baseEnv(t), "--token", "wrong"); code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("bad token: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := run(baseEnv(t, "WAGGLE_TOKEN="+tok.Token)); code != 0 || !strings.Contains(out, "hello team") {
		t.Fatalf("WAGGLE_TOKEN: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestChatCreatesNoEmptySession: a `waggle chat` that sends nothing — empty
// stdin in a pipe, or a terminal quit at once — leaves no empty session
// behind; the session is created with the first message.
func TestChatCreatesNoEmptySession(t *testing.T) {
	llm := agentModel(t, llmtest.NewPause())
	srv := startApp(t, llm)
	sessions := func() []map[string]any {
		t.Helper()
		var out []map[string]any
		if st := srv.JSON(http.MethodGet, "/api/workspaces/default/sessions", nil, &out); st != http.StatusOK {
			t.Fatalf("list sessions: %d", st)
		}
		return out
	}

	cmd := exec.Command(waggleBin, "chat", "--server", srv.URL)
	cmd.Env, cmd.Stdin = baseEnv(t), strings.NewReader("")
	if out, _ := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "nothing to send") {
		t.Fatalf("empty stdin: exit %d, output %q", cmd.ProcessState.ExitCode(), out)
	}
	if got := sessions(); len(got) != 0 {
		t.Fatalf("an empty pipe created sessions: %v", got)
	}

	term := startTerminal(t, "--server", srv.URL)
	term.expect("you> ")
	term.send("\x04") // Ctrl-D at once
	select {
	case <-term.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Ctrl-D did not quit:\n%s", term.out.String())
	}
	if err := term.cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if got := sessions(); len(got) != 0 {
		t.Fatalf("a terminal quit at once created sessions: %v", got)
	}

	// The first message creates the session, and the chat stays in it.
	term = startTerminal(t, "--server", srv.URL)
	term.expect("you> ")
	term.send("first\r")
	term.expect("you said: first")
	term.expect("you> ")
	term.send("second\r")
	term.expect("you said: second")
	term.expect("you> ")
	got := sessions()
	if len(got) != 1 {
		t.Fatalf("after two messages: sessions %v", got)
	}
	id, _ := got[0]["id"].(string)
	var h struct {
		Messages []struct{ Role, Content string }
	}
	srv.JSON(http.MethodGet, "/api/history?workspace=default&session="+id, nil, &h)
	if len(h.Messages) != 4 {
		t.Fatalf("history of %s: %+v", id, h.Messages)
	}
}

// TestChatTerminalTypeAhead: what the user types while a reply streams is
// kept, not dropped: it appears at the next prompt when the reply ends,
// and an Enter typed during the stream sends it then (type-ahead, as in a
// shell).
func TestChatTerminalTypeAhead(t *testing.T) {
	// "HOLD n" streams a first part and waits on holds[n].
	holds := []*llmtest.Pause{llmtest.NewPause(), llmtest.NewPause()}
	defer func() {
		for _, h := range holds {
			h.Release()
		}
	}()
	llm := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		last := r.Chat.Messages[len(r.Chat.Messages)-1].Content
		if _, n, ok := strings.Cut(last, "HOLD "); ok && (n == "0" || n == "1") {
			return llmtest.Response{Steps: []llmtest.Step{llmtest.Content("holding on"), llmtest.Wait(holds[n[0]-'0']), llmtest.Content(" — released")}}
		}
		return llmtest.Reply("you said: ", last)
	}))
	llm.Start()
	t.Cleanup(llm.Close)
	srv := startApp(t, llm)
	term := startTerminal(t, "--server", srv.URL, "--session", "ahead")
	term.expect("you> ")

	// Typed during the stream, no Enter: it waits in the input line.
	term.send("please HOLD 0\r")
	term.expect("holding on")
	term.send("kept in the line")
	holds[0].Release()
	term.expect("released")
	term.expect("you> ")
	term.expect("kept in the line")
	term.send(" and sent\r")
	term.expect("you said: kept in the line and sent")
	term.expect("you> ")

	// Typed during the stream with Enter: sent when the reply is done.
	term.send("please HOLD 1\r")
	term.expect("holding on")
	term.send("queued message\r")
	holds[1].Release()
	term.expect("released")
	term.expect("you said: queued message")
	term.expect("you> ")

	var h struct {
		Messages []struct{ Role, Content string }
	}
	srv.JSON(http.MethodGet, "/api/history?workspace=default&session=ahead", nil, &h)
	var user []string
	for _, m := range h.Messages {
		if m.Role == "user" {
			user = append(user, m.Content)
		}
	}
	if want := "please HOLD 0|kept in the line and sent|please HOLD 1|queued message"; strings.Join(user, "|") != want {
		t.Fatalf("user messages %q, want %q", user, want)
	}
}
