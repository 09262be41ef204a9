package webchat

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/waggle-os/core/libs/llmtest"
)

// lastUser is the content of the last user message a model request carried.
func lastUser(r *llmtest.Request) string {
	for i := len(r.Chat.Messages) - 1; i >= 0; i-- {
		if m := r.Chat.Messages[i]; m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// TestConversation: regenerate, edit and resend, copy, continue — what a
// user does with replies they do not like.
func TestConversation(t *testing.T) {
	b := browser(t)

	// asked records the user message of every reply the model wrote.
	var mu sync.Mutex
	var asked []string
	pause := llmtest.NewPause()
	defer pause.Release()
	llm := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		q := lastUser(r)
		mu.Lock()
		asked = append(asked, q)
		n := len(asked)
		mu.Unlock()
		if strings.Contains(q, "slow") {
			return llmtest.Response{Steps: []llmtest.Step{llmtest.Content("half of it"), llmtest.Wait(pause), llmtest.Content(" (finished)")}}
		}
		return llmtest.Reply(fmt.Sprintf("**answer %d** to: %s", n, q))
	}))
	llm.Start()
	t.Cleanup(llm.Close)
	lastAsked := func() (string, int) {
		mu.Lock()
		defer mu.Unlock()
		if len(asked) == 0 {
			return "", 0
		}
		return asked[len(asked)-1], len(asked)
	}
	srv := start(t, llm, nil)
	ctx := tab(t, b)
	replies := `document.querySelectorAll('#messages .msg.assistant').length`

	t.Run("Regenerate", func(t *testing.T) {
		run(t, ctx, open(srv.URL+"/"), send("what is two plus two"), until(lastReplyHas("answer 1")), until(replied),
			chromedp.WaitVisible(`#messages .msg.assistant .regen`, chromedp.ByQuery),
			chromedp.Click(`#messages .msg.assistant .regen`, chromedp.ByQuery),
			until(lastReplyHas("answer 2")), until(replied), until(replies+` === 2`),
			// Only the last reply offers Regenerate.
			until(`document.querySelectorAll('#messages .regen').length === 1 && !!document.querySelectorAll('#messages .msg.assistant')[1].querySelector('.regen')`),
		)
		if q, n := lastAsked(); n != 2 || !strings.Contains(q, "what is two plus two") {
			t.Fatalf("regenerate asked the model %d times, last with %q", n, q)
		}
	})

	t.Run("Copy", func(t *testing.T) {
		var copied string
		run(t, ctx,
			chromedp.Evaluate(`navigator.clipboard.writeText = t => { window.__copied = t; return Promise.resolve(); }`, nil),
			chromedp.Click(`#messages .msg.assistant:last-of-type .copy-msg`, chromedp.ByQuery),
			until(`typeof window.__copied === 'string'`),
			chromedp.Evaluate(`window.__copied`, &copied),
		)
		// The reply's source (its Markdown), not the rendered text.
		if !strings.HasPrefix(copied, "**answer 2** to: ") {
			t.Fatalf("copied %q", copied)
		}
	})

	// Editing an earlier message branches the session: the branch keeps
	// what came before it, the original stays as it was, ‹ › on the
	// message switches between them, and all of it survives a reload.
	t.Run("EditBranches", func(t *testing.T) {
		users := `[...document.querySelectorAll('#messages .msg.user .bubble')].map(e => e.textContent).join('|')`
		// pos is the switcher of the i-th user message ('' without one).
		pos := func(i int) string {
			return fmt.Sprintf(`(() => { const m = document.querySelectorAll('#messages .msg.user')[%d]; const p = m && m.querySelector('.branch-pos'); return p ? p.textContent : ''; })()`, i)
		}
		var original string
		run(t, ctx, chromedp.Evaluate(`JSON.parse(localStorage.getItem('waggle.session')).id`, &original),
			// Find and click in one step: the list re-renders after a turn.
			until(`(() => { const b = document.querySelectorAll('#messages .msg.user')[1]?.querySelector('.edit-msg'); if (b) b.click(); return !!b; })()`),
			chromedp.WaitVisible(`#editing`, chromedp.ByID),
			until(`document.querySelector('#input').value === 'what is two plus two' && document.activeElement.id === 'input'`),
			chromedp.Evaluate(`document.querySelector('#input').value = 'what is two plus three'`, nil),
			send(""),
			until(lastReplyHas("answer 3")), until(replied),
			until(`document.querySelector('#editing').hidden`),
			until(users+` === 'what is two plus two|what is two plus three'`),
			until(pos(1)+` === '2 / 2' && `+pos(0)+` === ''`),
		)
		reqs := llm.ChatRequests()
		var sent []string
		for _, m := range reqs[len(reqs)-1].Chat.Messages {
			sent = append(sent, m.Content)
		}
		all := strings.Join(sent, "\n")
		if !strings.Contains(all, "answer 1") || strings.Contains(all, "answer 2") || !strings.Contains(all, "what is two plus three") {
			t.Fatalf("the branch's model request carried %q; want the exchange before the edit and not the one after it", sent)
		}
		var branch string
		run(t, ctx, chromedp.Evaluate(`JSON.parse(localStorage.getItem('waggle.session')).id`, &branch))
		if branch == original || branch == "" {
			t.Fatalf("the edit did not open a branch: %q (original %q)", branch, original)
		}
		screenshot(t, ctx, "webchat-branches.png")

		// ‹ goes back to the original, unchanged; a reload keeps it.
		click := func(sel string) chromedp.Action {
			return until(`(() => { const b = document.querySelector(` + js(sel) + `); if (b && !b.disabled) b.click(); return !!b && !b.disabled; })()`)
		}
		run(t, ctx, click(`#messages .msg.user .branch-prev`),
			until(users+` === 'what is two plus two|what is two plus two'`),
			until(pos(1)+` === '1 / 2'`),
			until(`document.querySelectorAll('#messages .msg.assistant').length === 2 && `+lastReplyHas("answer 2")),
			chromedp.Reload(), chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
			until(users+` === 'what is two plus two|what is two plus two'`),
			until(pos(1)+` === '1 / 2'`),
			// › goes to the branch again.
			click(`#messages .msg.user .branch-next`),
			until(users+` === 'what is two plus two|what is two plus three'`),
			until(pos(1)+` === '2 / 2'`),
			until(`JSON.parse(localStorage.getItem('waggle.session')).id === `+js(branch)),
			// The sidebar lists both, the branch marked.
			until(`document.querySelectorAll('#sessions li.session').length === 2 && document.querySelectorAll('#sessions li.session .branch-mark').length === 1`),
		)
	})

	t.Run("ContinueAfterStop", func(t *testing.T) {
		run(t, ctx, send("be slow"), until(lastReplyHas("half of it")),
			chromedp.Click(`#stop`, chromedp.ByID), until(idle),
			chromedp.WaitVisible(`#messages .msg.assistant .continue`, chromedp.ByQuery),
			chromedp.Click(`#messages .msg.assistant .continue`, chromedp.ByQuery),
			until(lastReplyHas("to: Continue from where you stopped.")), until(replied),
			until(`!document.querySelector('#messages .continue')`),
		)
		// Regenerate survives a reload (history draws the same buttons).
		run(t, ctx, chromedp.Reload(), chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
			until(lastReplyHas("Continue from where you stopped.")),
			chromedp.WaitVisible(`#messages .msg.assistant:last-of-type .regen`, chromedp.ByQuery))
	})
}
