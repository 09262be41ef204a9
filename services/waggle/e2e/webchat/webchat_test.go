// Package webchat drives the embedded web chat in headless Chromium
// (chromedp) against a whole waggle app and the scripted model server:
// what a person sees and clicks, over the real HTTP API.
package webchat

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

const ws = "default"

// chromium finds the browser: WAGGLE_CHROMIUM, else the usual names on
// PATH (.ci/run installs Debian's chromium).
func chromium() string {
	if p := os.Getenv("WAGGLE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts one headless Chromium for the whole test; subtests open
// their own tabs. Without Chromium the test skips loudly, except in CI
// (CI set, e.g. CI=true), where a missing browser is a failure: .ci/run
// installs it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromium()
	if path == "" {
		msg := "no chromium on PATH (apt-get install chromium, or set WAGGLE_CHROMIUM): the web chat browser tests did NOT run"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		fmt.Fprintln(os.Stderr, "SKIP:", msg)
		t.Skip(msg)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox cannot start
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 860),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// cdproto does not know every event of a newer Chromium (the dialog's
	// top layer); those reports are noise, anything else is shown.
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "unhandled node event") {
			fmt.Fprintln(os.Stderr, "chromedp:", msg)
		}
	}))
	if err := chromedp.Run(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start chromium %s: %v", path, err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return ctx
}

// tab opens a new tab with a deadline for one subtest.
func tab(t *testing.T, browserCtx context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
	})
	return ctx
}

func run(t *testing.T, ctx context.Context, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var dump string
		// The tab's deadline has usually passed: the dump gets its own,
		// short one (without it a stuck tab hangs the test binary).
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = chromedp.Run(dctx, chromedp.Evaluate(`document.body ? document.body.innerText : ''`, &dump))
		t.Fatalf("browser: %v\npage text:\n%s", err, dump)
	}
}

// open loads the page and waits until it has booted.
func open(url string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.Navigate(url),
		chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
	}
}

// until polls a JavaScript condition (no sleeps: Chromium evaluates it on
// every animation frame until it is truthy or the tab's deadline passes).
func until(expr string) chromedp.Action {
	var ok bool
	return chromedp.Poll(expr, &ok, chromedp.WithPollingTimeout(30*time.Second))
}

// send types a message and presses Enter.
func send(text string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.WaitReady(`#input`, chromedp.ByID),
		chromedp.SendKeys(`#input`, text, chromedp.ByID),
		chromedp.SendKeys(`#input`, kb.Enter, chromedp.ByID),
	}
}

func js(s string) string { b, _ := json.Marshal(s); return string(b) }

// lastReplyHas is true when the last assistant message's text contains s.
func lastReplyHas(s string) string {
	return `(() => { const m = [...document.querySelectorAll('#messages .msg.assistant')].pop();
	  return !!m && m.textContent.includes(` + js(s) + `); })()`
}

const idle = `!document.querySelector('#messages .msg.assistant.running') && document.querySelector('#stop').hidden && !document.querySelector('#send').disabled`

// replied is true once the last message is a finished reply (right after a
// send the page is briefly idle before its turn starts).
const replied = `(() => { const m = [...document.querySelectorAll('#messages .msg')].pop();
  return !!m && m.classList.contains('assistant') && (` + idle + `); })()`

// artifactDir is where screenshots go: WAGGLE_TEST_ARTIFACTS when set
// (CI keeps it), else the test's temp dir.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("WAGGLE_TEST_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	var png []byte
	run(t, ctx, chromedp.CaptureScreenshot(&png))
	path := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot %s is not a PNG (%d bytes)", path, len(png))
	}
	t.Logf("screenshot: %s", path)
}

// model answers like a small agent: "CALL <tool> <json>" in the user's
// message gets that tool call, a tool result gets a closing reply with a
// code block, anything else is answered by reply.
func model(t *testing.T, reply func(last string) llmtest.Response) *llmtest.Server {
	t.Helper()
	s := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		msgs := r.Chat.Messages
		last := msgs[len(msgs)-1]
		if last.Role == "tool" {
			return llmtest.Reply("I wrote the file. It now reads:\n\n", "```text\n", "hello from the browser test\n", "```\n\nAnything else?")
		}
		if resp, ok := llmtest.CallDirective(last.Content); ok {
			return resp
		}
		return reply(last.Content)
	}))
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func start(t *testing.T, llm *llmtest.Server, edit func(*app.Config)) *waggletest.Server {
	t.Helper()
	opts := []waggletest.Option{waggletest.WithConfig(func(c *app.Config) {
		c.Approval.Timeout = 30 * time.Second
		// A reload drops the page's connection; the turn must outlive it.
		c.TurnRunner.DisconnectGrace = 30 * time.Second
		if edit != nil {
			edit(c)
		}
	})}
	if llm != nil {
		opts = append(opts, waggletest.WithLLM(llm.URL()))
	}
	return waggletest.Start(t, opts...)
}

func TestWebChat(t *testing.T) {
	b := browser(t)

	t.Run("StreamsMarkdown", func(t *testing.T) {
		pause := llmtest.NewPause()
		defer pause.Release()
		llm := model(t, func(string) llmtest.Response {
			return llmtest.Response{Steps: []llmtest.Step{
				llmtest.Content("Here is **bold** text"), llmtest.Wait(pause),
				llmtest.Content(" and code:\n\n```go\nfmt.Println(\"hi\")\n```\n"),
			}}
		})
		srv := start(t, llm, nil)
		ctx := tab(t, b)
		run(t, ctx, open(srv.URL+"/"), send("show me some markdown"),
			// The first token is on screen while the model is still
			// holding the rest back: the reply streams.
			until(lastReplyHas("Here is bold text")),
			until(`!!document.querySelector('#messages .msg.assistant.running')`),
		)
		var strong string
		run(t, ctx, chromedp.Text(`#messages .msg.assistant strong`, &strong, chromedp.ByQuery))
		if strong != "bold" {
			t.Fatalf("bold rendered as %q", strong)
		}
		pause.Release()
		var code, lang string
		run(t, ctx, until(idle), until(`!!document.querySelector('#messages .code-block')`),
			chromedp.Text(`#messages .code-block pre code`, &code, chromedp.ByQuery),
			chromedp.Text(`#messages .code-block .code-lang`, &lang, chromedp.ByQuery),
			until(`!!document.querySelector('#messages .code-block button.copy')`),
		)
		if code != `fmt.Println("hi")` || lang != "go" {
			t.Fatalf("code block %q (%q)", code, lang)
		}
		// The reply is stored: a fresh page load shows it from history.
		run(t, ctx, chromedp.Reload(), chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
			until(lastReplyHas("fmt.Println")), until(`document.querySelector('#messages .msg.user .bubble').textContent === 'show me some markdown'`))
	})

	t.Run("ApprovalDialog", func(t *testing.T) {
		llm := model(t, func(string) llmtest.Response { return llmtest.Reply("ok") })
		srv := start(t, llm, nil)
		ctx := tab(t, b)
		args := `{"path":"notes/hello.txt","content":"hello from the browser test"}`
		run(t, ctx, open(srv.URL+"/"), send("please CALL write_file "+args),
			chromedp.WaitVisible(`#messages .approval button.allow-once`, chromedp.ByQuery),
			until(`document.querySelector('#approvals-count').textContent === '1'`),
		)
		var title, input string
		run(t, ctx, chromedp.Text(`#messages .approval-title`, &title, chromedp.ByQuery),
			chromedp.Text(`#messages .approval-input`, &input, chromedp.ByQuery))
		if title != "Allow write_file?" || !strings.Contains(input, `"path": "notes/hello.txt"`) {
			t.Fatalf("approval card %q %q", title, input)
		}
		if _, err := os.Stat(filepath.Join(srv.DataDir, "workspaces", ws, "files", "notes", "hello.txt")); err == nil {
			t.Fatal("the file exists before the approval")
		}
		// The pending list is the server's: it survives a reload.
		run(t, ctx, chromedp.Click(`#approvals-toggle`, chromedp.ByID),
			chromedp.WaitVisible(`#approvals-list .approval button.allow-once`, chromedp.ByQuery))
		screenshot(t, ctx, "webchat-approval.png")

		run(t, ctx, chromedp.Click(`#messages .approval button.allow-once`, chromedp.ByQuery),
			until(lastReplyHas("Anything else?")), until(idle),
			until(`document.querySelector('#messages .approval-outcome').textContent === 'Allowed once'`),
			until(`document.querySelector('#approvals-count').textContent === '0'`),
			until(`[...document.querySelectorAll('#messages .tool-result')].some(e => e.textContent.length > 0)`),
			until(`[...document.querySelectorAll('#messages .note.file')].some(e => e.textContent.includes('notes/hello.txt'))`),
		)
		data, err := os.ReadFile(filepath.Join(srv.DataDir, "workspaces", ws, "files", "notes", "hello.txt"))
		if err != nil || string(data) != "hello from the browser test" {
			t.Fatalf("file after approval: %q %v", data, err)
		}
		run(t, ctx, chromedp.Click(`#approvals-toggle`, chromedp.ByID), until(`document.querySelector('#approvals').hidden`))
		screenshot(t, ctx, "webchat.png") // the README's picture
	})

	t.Run("ReloadResumesTurn", func(t *testing.T) {
		pause := llmtest.NewPause()
		defer pause.Release()
		llm := model(t, func(string) llmtest.Response {
			return llmtest.Response{Steps: []llmtest.Step{llmtest.Content("first half, "), llmtest.Wait(pause), llmtest.Content("second half.")}}
		})
		srv := start(t, llm, nil)
		ctx := tab(t, b)
		var before, after string
		run(t, ctx, open(srv.URL+"/"), send("a long answer please"),
			until(lastReplyHas("first half")),
			chromedp.AttributeValue(`#messages .msg.assistant.running`, "data-turn-id", &before, nil, chromedp.ByQuery),
			chromedp.Reload(),
			chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
			until(lastReplyHas("first half")),
			chromedp.AttributeValue(`#messages .msg.assistant.running`, "data-turn-id", &after, nil, chromedp.ByQuery),
		)
		if before == "" || before != after {
			t.Fatalf("turn before reload %q, after %q", before, after)
		}
		pause.Release()
		run(t, ctx, until(lastReplyHas("first half, second half.")), until(idle),
			until(`localStorage.getItem('waggle.turn') === null`))
		if n := len(llm.ChatRequests()); n != 1 {
			t.Fatalf("the model was asked %d times; a reload must not send the message again", n)
		}
		var users int
		run(t, ctx, chromedp.Evaluate(`document.querySelectorAll('#messages .msg.user').length`, &users))
		if users != 1 {
			t.Fatalf("%d user messages after the reload", users)
		}
	})

	// A reload shows a session the way it looked live: the tool call with
	// its result and the file it wrote, and a stopped reply marked stopped
	// (not looking complete).
	t.Run("ReloadShowsToolsAndStop", func(t *testing.T) {
		pause := llmtest.NewPause()
		defer pause.Release()
		llm := model(t, func(string) llmtest.Response {
			return llmtest.Response{Steps: []llmtest.Step{llmtest.Content("half an answer"), llmtest.Wait(pause), llmtest.Content(" (finished)")}}
		})
		srv := start(t, llm, nil)
		ctx := tab(t, b)
		args := `{"path":"notes/hello.txt","content":"<b>not markup</b>"}`
		run(t, ctx, open(srv.URL+"/"), send("please CALL write_file "+args),
			chromedp.WaitVisible(`#messages .approval button.allow-once`, chromedp.ByQuery),
			chromedp.Click(`#messages .approval button.allow-once`, chromedp.ByQuery),
			until(lastReplyHas("Anything else?")), until(idle),
			send("go on forever"), until(lastReplyHas("half an answer")),
			chromedp.Click(`#stop`, chromedp.ByID),
			until(`[...document.querySelectorAll('#messages .note.turn-error')].some(e => e.textContent.includes('cancelled'))`),
			until(idle),
			chromedp.Reload(), chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
			until(lastReplyHas("half an answer")),
		)
		var got struct {
			Tool    string `json:"tool"`
			Input   string `json:"input"`
			Result  string `json:"result"`
			File    string `json:"file"`
			Stopped string `json:"stopped"`
			Markup  int    `json:"markup"`
			Replies int    `json:"replies"`
		}
		run(t, ctx, chromedp.Evaluate(`(() => {
		  const replies = [...document.querySelectorAll('#messages .msg.assistant')];
		  const first = replies[0] || document.body, last = replies[replies.length - 1] || document.body;
		  const card = [...first.querySelectorAll('details.tool')].find(c => c.querySelector('summary').textContent.includes('write_file'));
		  const text = (root, sel) => { const e = root && root.querySelector(sel); return e ? e.textContent : ''; };
		  const stopped = last.querySelector('.note.turn-error');
		  return { tool: text(card, 'summary'), input: text(card, '.tool-input'), result: text(card, '.tool-result'),
		    file: text(first, '.note.file'), stopped: stopped ? stopped.textContent : '',
		    markup: document.querySelectorAll('#messages b').length, replies: replies.length };
		})()`, &got))
		if got.Replies != 2 || !strings.Contains(got.Tool, "write_file") || !strings.Contains(got.Input, "notes/hello.txt") || got.Result == "" {
			t.Fatalf("after a reload the tool call is not shown: %+v", got)
		}
		if !strings.Contains(got.File, "notes/hello.txt") {
			t.Fatalf("after a reload the file written is not shown: %+v", got)
		}
		if !strings.Contains(got.Stopped, "Stopped") {
			t.Fatalf("after a reload the stopped reply looks complete: %+v", got)
		}
		if got.Markup != 0 {
			t.Fatalf("a tool's input became markup: %+v", got)
		}
		screenshot(t, ctx, "webchat-reloaded.png")
	})

	t.Run("StopCancelsTurn", func(t *testing.T) {
		pause := llmtest.NewPause()
		defer pause.Release()
		llm := model(t, func(string) llmtest.Response {
			return llmtest.Response{Steps: []llmtest.Step{llmtest.Content("this will never finish"), llmtest.Wait(pause), llmtest.Content(" (finished)")}}
		})
		srv := start(t, llm, nil)
		ctx := tab(t, b)
		run(t, ctx, open(srv.URL+"/"), send("go on forever"),
			until(lastReplyHas("this will never finish")),
			chromedp.Click(`#stop`, chromedp.ByID),
			until(`[...document.querySelectorAll('#messages .note.turn-error')].some(e => e.textContent.includes('cancelled'))`),
			until(idle),
		)
		reqs := llm.ChatRequests()
		if len(reqs) != 1 {
			t.Fatalf("%d model requests", len(reqs))
		}
		select {
		case <-reqs[0].Cancelled():
		case <-time.After(10 * time.Second):
			t.Fatal("the model request was not cancelled by Stop")
		}
		var reply string
		run(t, ctx, chromedp.Text(`#messages .msg.assistant`, &reply, chromedp.ByQuery))
		if strings.Contains(reply, "(finished)") {
			t.Fatalf("the stopped turn finished: %q", reply)
		}
	})

	t.Run("RenameAndDeleteSession", func(t *testing.T) {
		srv := start(t, nil, nil) // echo mode: no model needed
		ctx := tab(t, b)
		run(t, ctx, open(srv.URL+"/"), send("hello sidebar http://localhost:11434/v1"), until(replied),
			// The echo reply quotes the message: its bare URL is a link
			// whose text is the URL (a bare URL used to send the renderer
			// into endless recursion).
			until(`[...document.querySelectorAll('#messages .msg.assistant a')].some(a => a.href === 'http://localhost:11434/v1' && a.textContent === 'http://localhost:11434/v1')`),
			chromedp.WaitVisible(`#sessions li.session button.rename`, chromedp.ByQuery),
			chromedp.Click(`#sessions li.session button.rename`, chromedp.ByQuery),
			chromedp.WaitVisible(`#sessions .rename-input`, chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelector('#sessions .rename-input').value = ''`, nil),
			chromedp.SendKeys(`#sessions .rename-input`, "Renamed in the browser"+kb.Enter, chromedp.ByQuery),
			until(`[...document.querySelectorAll('#sessions li.session .open')].some(e => e.textContent === 'Renamed in the browser')`),
			until(`document.querySelector('#title').textContent === 'Renamed in the browser'`),
		)
		var list []struct {
			ID, Title string
		}
		if st := srv.JSON(http.MethodGet, "/api/workspaces/"+ws+"/sessions", nil, &list); st != 200 || len(list) != 1 || list[0].Title != "Renamed in the browser" {
			t.Fatalf("sessions after rename: %d %+v", st, list)
		}
		run(t, ctx,
			chromedp.Click(`#sessions li.session button.delete`, chromedp.ByQuery),
			until(`document.querySelector('#sessions li.session button.delete').textContent === 'Confirm delete'`),
			chromedp.Click(`#sessions li.session button.delete`, chromedp.ByQuery),
			until(`document.querySelectorAll('#sessions li.session').length === 0`),
			until(`document.querySelector('#title').textContent === 'New chat'`),
		)
		if st := srv.JSON(http.MethodGet, "/api/workspaces/"+ws+"/sessions", nil, &list); st != 200 || len(list) != 0 {
			t.Fatalf("sessions after delete: %d %+v", st, list)
		}
	})

	t.Run("WorkspacesAndSearch", func(t *testing.T) {
		srv := start(t, nil, nil)
		ctx := tab(t, b)
		sessions := `document.querySelectorAll('#sessions li.session').length`
		run(t, ctx, open(srv.URL+"/"),
			chromedp.Click(`#new-workspace`, chromedp.ByID),
			chromedp.SendKeys(`#workspace-name`, "Research Lab"+kb.Enter, chromedp.ByID),
			until(`document.querySelector('#workspace').value === 'research-lab'`),
			send("zebra facts please"), until(replied),
			chromedp.Click(`#new-session`, chromedp.ByID), until(`document.querySelectorAll('#messages .msg').length === 0`),
			send("tell me about lions"), until(replied),
			until(sessions+` === 2`),
			chromedp.SendKeys(`#search`, "zebra", chromedp.ByID),
			until(sessions+` === 1 && document.querySelector('#sessions li.session .open').textContent.includes('zebra')`),
			chromedp.Evaluate(`(() => { const s = document.querySelector('#search'); s.value = ''; s.dispatchEvent(new Event('input')); })()`, nil),
			until(sessions+` === 2`),
			chromedp.Click(`#rename-workspace`, chromedp.ByID),
			chromedp.Evaluate(`document.querySelector('#workspace-name').value = ''`, nil),
			chromedp.SendKeys(`#workspace-name`, "Lab Two"+kb.Enter, chromedp.ByID),
			until(`document.querySelector('#workspace').selectedOptions[0].textContent === 'Lab Two'`),
		)
		var w struct{ Name string }
		if st := srv.JSON(http.MethodGet, "/api/workspaces/research-lab", nil, &w); st != 200 || w.Name != "Lab Two" {
			t.Fatalf("workspace after rename: %d %+v", st, w)
		}
		run(t, ctx,
			chromedp.Click(`#delete-workspace`, chromedp.ByID),
			until(`document.querySelector('#delete-workspace').classList.contains('confirm')`),
			chromedp.Click(`#delete-workspace`, chromedp.ByID),
			until(`![...document.querySelectorAll('#workspace option')].some(o => o.value === 'research-lab')`),
			until(`document.querySelector('#workspace').value === 'default'`),
		)
		if st := srv.JSON(http.MethodGet, "/api/workspaces/research-lab", nil, nil); st != 404 {
			t.Fatalf("workspace after delete: %d", st)
		}
	})

	t.Run("ModelSwitchVisible", func(t *testing.T) {
		llm := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
			if r.Chat.Model == "claude-sonnet-4-6" {
				fail := llmtest.ErrorStatus(http.StatusInternalServerError, "upstream failure")
				fail.Header = http.Header{"Retry-After": []string{"0"}}
				return fail
			}
			return llmtest.Reply("from the fallback")
		}))
		llm.Start()
		t.Cleanup(llm.Close)
		data := t.TempDir()
		if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(`{"fallbackModel":"claude-haiku-3-5"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		srv := start(t, llm, func(c *app.Config) { c.DataDir = data })
		ctx := tab(t, b)
		run(t, ctx, open(srv.URL+"/"), send("hello"), until(replied), until(lastReplyHas("from the fallback")),
			until(`[...document.querySelectorAll('#messages .note.switch')].some(e =>
			  e.textContent === 'Switched to claude-haiku-3-5 — claude-sonnet-4-6 failed (500)')`),
			until(`document.querySelector('#messages .msg.assistant .meta').textContent.startsWith('claude-haiku-3-5')`),
		)
	})

	t.Run("HTMLInReplyIsText", func(t *testing.T) {
		evil := `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> [x](javascript:window.__pwned=3) **still markdown**`
		llm := model(t, func(string) llmtest.Response { return llmtest.Reply(evil[:20], evil[20:]) })
		srv := start(t, llm, nil)
		ctx := tab(t, b)
		check := func(where string) {
			t.Helper()
			var res struct {
				Pwned  bool   `json:"pwned"`
				Text   string `json:"text"`
				Tags   int    `json:"tags"`
				Strong string `json:"strong"`
				Links  int    `json:"links"`
			}
			run(t, ctx, chromedp.Evaluate(`(() => { const m = [...document.querySelectorAll('#messages .msg.assistant')].pop();
			  return { pwned: window.__pwned !== undefined, text: m.textContent,
			    tags: m.querySelectorAll('script, img').length, strong: (m.querySelector('strong') || {}).textContent || '',
			    links: m.querySelectorAll('a').length }; })()`, &res))
			if res.Pwned || res.Tags != 0 || res.Links != 0 {
				t.Fatalf("%s: HTML from the model became markup: %+v", where, res)
			}
			if !strings.Contains(res.Text, `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">`) || res.Strong != "still markdown" {
				t.Fatalf("%s: reply not shown as text: %+v", where, res)
			}
		}
		run(t, ctx, open(srv.URL+"/"), send("say something nasty"), until(lastReplyHas("still markdown")), until(replied))
		check("streamed")
		run(t, ctx, chromedp.Reload(), chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery), until(lastReplyHas("still markdown")))
		check("from history")
	})

	t.Run("ErrorsAreReadable", func(t *testing.T) {
		srv := start(t, nil, func(c *app.Config) { c.Gateway.MaxMessageLength = 10 })
		ctx := tab(t, b)
		var text string
		run(t, ctx, open(srv.URL+"/"), send("this message is far too long"),
			chromedp.WaitVisible(`#error`, chromedp.ByID),
			chromedp.Text(`#error-text`, &text, chromedp.ByID),
		)
		if !strings.HasPrefix(text, "400 · Message too long") || !strings.Contains(text, "MESSAGE_TOO_LONG") {
			t.Fatalf("error banner %q", text)
		}
		var input string
		run(t, ctx, chromedp.Value(`#input`, &input, chromedp.ByID))
		if input != "this message is far too long" {
			t.Fatalf("the rejected message was not given back: %q", input)
		}
	})

	t.Run("TeamModeAsksForToken", func(t *testing.T) {
		natsAddr := waggletest.FreeAddr(t)
		srv := start(t, nil, func(c *app.Config) {
			c.SessionStore.PostgresURL = pgtest.URL(t)
			c.Gateway.Auth = "required"
			c.NATSListen = natsAddr
		})
		nc := srv.DialNATS()
		waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"})
		tok := waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "olga"})
		if st := srv.JSON(http.MethodPost, "/api/workspaces", map[string]any{"name": "Acme Ops", "teamId": "acme"}, nil,
			"Authorization", "Bearer "+tok.Token); st != 200 && st != 201 {
			t.Fatalf("create team workspace: %d", st)
		}
		page := tab(t, b)
		run(t, page, chromedp.Navigate(srv.URL+"/"),
			chromedp.WaitVisible(`#token-dialog[open] #token-input`, chromedp.ByQuery),
			chromedp.SendKeys(`#token-input`, "not-a-token"+kb.Enter, chromedp.ByID),
			until(`document.querySelector('#token-error').textContent === 'That token is not valid.'`),
			chromedp.Evaluate(`document.querySelector('#token-input').value = ''`, nil),
			chromedp.SendKeys(`#token-input`, tok.Token+kb.Enter, chromedp.ByID),
			chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
			until(`!document.querySelector('#token-dialog').open`),
			until(`[...document.querySelectorAll('#workspace option')].some(o => o.textContent === 'Acme Ops')`),
			send("hello team"), until(replied), until(lastReplyHas("hello team")),
			// The token is kept in the browser: a reload does not ask again.
			chromedp.Reload(), chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
			until(`!document.querySelector('#token-dialog').open`),
			until(lastReplyHas("hello team")),
			// Sign out forgets the token: the page asks for one again and
			// shows nothing of the session.
			chromedp.WaitVisible(`#sign-out`, chromedp.ByID),
			chromedp.Click(`#sign-out`, chromedp.ByID),
			chromedp.WaitVisible(`#token-dialog[open] #token-input`, chromedp.ByQuery),
			until(`localStorage.getItem('waggle.token') === null && document.querySelectorAll('#messages .msg').length === 0`),
		)
	})

	// A fresh team server (a team and a token, no workspace yet) is usable
	// from the web chat: no 404, the page offers to create a workspace,
	// asks in which of the user's teams, and creates it there.
	t.Run("NewTeamServerHasWorkspace", func(t *testing.T) {
		llm := model(t, func(string) llmtest.Response { return llmtest.Reply("hello from the team") })
		natsAddr := waggletest.FreeAddr(t)
		srv := start(t, llm, func(c *app.Config) {
			c.SessionStore.PostgresURL = pgtest.URL(t)
			c.Gateway.Auth = "required"
			c.NATSListen = natsAddr
		})
		nc := srv.DialNATS()
		waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"})
		waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "beta", Owner: "olga"})
		tok := waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "olga"})
		page := tab(t, b)
		run(t, page, chromedp.Navigate(srv.URL+"/"),
			chromedp.WaitVisible(`#token-dialog[open] #token-input`, chromedp.ByQuery),
			chromedp.SendKeys(`#token-input`, tok.Token+kb.Enter, chromedp.ByID),
			chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
			// Each new team came with its first workspace: the page opens
			// on one and chats at once, no error, no form in the way.
			until(`[...document.querySelectorAll('#workspace option')].map(o => o.value).sort().join() === 'acme,beta'`),
			until(`document.querySelector('#error').hidden`),
			until(`document.querySelector('#workspace-form').hidden`),
			send("hello team"), until(replied), until(lastReplyHas("hello from the team")),
			// Another workspace goes into the team the user picks.
			chromedp.Click(`#new-workspace`, chromedp.ByID),
			chromedp.WaitVisible(`#workspace-form`, chromedp.ByID),
			until(`[...document.querySelectorAll('#workspace-team option')].map(o => o.value).join() === 'acme,beta'`),
			chromedp.SetValue(`#workspace-team`, "beta", chromedp.ByID),
			chromedp.SendKeys(`#workspace-name`, "Beta Lab"+kb.Enter, chromedp.ByID),
			until(`document.querySelector('#workspace').value === 'beta-lab'`),
			// In two teams, the workspaces are grouped by team.
			until(`document.querySelector('#workspace option[value="beta-lab"]').parentElement.label === 'beta'`),
			send("hello lab"), until(replied), until(lastReplyHas("hello from the team")),
			until(`document.querySelector('#error').hidden`),
		)
		var w struct{ TeamID string }
		if st := srv.JSON(http.MethodGet, "/api/workspaces/beta-lab", nil, &w, "Authorization", "Bearer "+tok.Token); st != 200 || w.TeamID != "beta" {
			t.Fatalf("workspace made from the page: %d %+v", st, w)
		}
	})

	t.Run("PhoneWidth", func(t *testing.T) {
		srv := start(t, nil, nil)
		ctx := tab(t, b)
		run(t, ctx, chromedp.EmulateViewport(390, 800), open(srv.URL+"/"),
			chromedp.WaitVisible(`#menu`, chromedp.ByID),
			until(`document.querySelector('#sidebar').getBoundingClientRect().right <= 0`),
			chromedp.Click(`#menu`, chromedp.ByID),
			until(`document.querySelector('#sidebar').getBoundingClientRect().left >= 0`),
			chromedp.Click(`#new-session`, chromedp.ByID),
			until(`document.querySelector('#sidebar').getBoundingClientRect().right <= 0`),
			send("hi from a phone"), until(replied),
			until(`document.documentElement.scrollWidth <= 390`),
		)
	})

	// The phone drawer closes the three ways a phone user tries: its close
	// button, a tap on the page beside it, and Escape.
	t.Run("PhoneDrawerCloses", func(t *testing.T) {
		llm := model(t, func(string) llmtest.Response { return llmtest.Reply("hello phone") })
		srv := start(t, llm, nil)
		ctx := tab(t, b)
		closed := until(`document.querySelector('#sidebar').getBoundingClientRect().right <= 0`)
		opened := until(`document.querySelector('#sidebar').getBoundingClientRect().left >= 0`)
		run(t, ctx, chromedp.EmulateViewport(390, 800), open(srv.URL+"/"),
			chromedp.WaitVisible(`#menu`, chromedp.ByID), closed,
			chromedp.Click(`#menu`, chromedp.ByID), opened,
			chromedp.WaitVisible(`#menu-close`, chromedp.ByID),
			chromedp.Click(`#menu-close`, chromedp.ByID), closed,
			chromedp.Click(`#menu`, chromedp.ByID), opened,
			// A tap right of the 280px drawer, on the page behind it.
			chromedp.MouseClickXY(360, 400), closed,
			chromedp.Click(`#menu`, chromedp.ByID), opened,
			chromedp.KeyEvent(kb.Escape), closed,
			// Closed, the drawer leaves the page usable.
			send("still works"), until(replied),
		)
	})
}
