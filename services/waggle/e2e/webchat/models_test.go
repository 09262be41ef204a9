package webchat

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/waggle-os/core/libs/llmtest"
)

// answerModels makes the tab's requests for GET /api/litellm/models get
// status and body, whatever the server would say: the picker is tested
// against the route's shape ({models: [id…]}) and against a server
// without the route (404), on any branch.
func answerModels(ctx context.Context, status int64, body string) chromedp.Action {
	chromedp.ListenTarget(ctx, func(ev any) {
		e, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		go func() {
			c := chromedp.FromContext(ctx)
			ectx := cdp.WithExecutor(ctx, c.Target)
			_ = fetch.FulfillRequest(e.RequestID, status).
				WithResponseHeaders([]*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}}).
				WithBody(base64.StdEncoding.EncodeToString([]byte(body))).Do(ectx)
		}()
	})
	return fetch.Enable().WithPatterns([]*fetch.RequestPattern{{URLPattern: "*/api/litellm/models*"}})
}

// TestModelPicker: the models route fills the picker, the pick is what
// the model server is asked for and is remembered; without the route the
// picker stays hidden and the default model answers.
func TestModelPicker(t *testing.T) {
	b := browser(t)
	llm := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		return llmtest.Reply("answered by " + r.Chat.Model)
	}))
	llm.Start()
	t.Cleanup(llm.Close)
	srv := start(t, llm, nil)

	t.Run("Picks", func(t *testing.T) {
		ctx := tab(t, b)
		run(t, ctx, answerModels(ctx, 200, `{"models":["claude-haiku-3-5","claude-sonnet-4-6"]}`), open(srv.URL+"/"),
			chromedp.WaitVisible(`#model`, chromedp.ByID),
			until(`[...document.querySelectorAll('#model option')].map(o => o.value).join() === ',claude-haiku-3-5,claude-sonnet-4-6'`),
			chromedp.SetValue(`#model`, "claude-haiku-3-5", chromedp.ByID),
			chromedp.Evaluate(`document.querySelector('#model').dispatchEvent(new Event('change'))`, nil),
			send("which model?"), until(lastReplyHas("answered by claude-haiku-3-5")), until(replied),
			chromedp.Reload(), chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
			until(`document.querySelector('#model').value === 'claude-haiku-3-5'`),
		)
		reqs := llm.ChatRequests()
		if got := reqs[len(reqs)-1].Chat.Model; got != "claude-haiku-3-5" {
			t.Fatalf("the model server was asked for %q", got)
		}
	})

	t.Run("HiddenWithoutRoute", func(t *testing.T) {
		ctx := tab(t, b)
		run(t, ctx, answerModels(ctx, 404, `{"error":"Not found"}`), open(srv.URL+"/"),
			chromedp.Evaluate(`localStorage.removeItem('waggle.model')`, nil),
			send("which model now?"), until(lastReplyHas("answered by")), until(replied),
			until(`document.querySelector('#model').hidden && document.querySelector('#error').hidden`),
		)
		reqs := llm.ChatRequests()
		if got := reqs[len(reqs)-1].Chat.Model; got == "claude-haiku-3-5" {
			t.Fatalf("without a picker the page still asked for %q", got)
		}
	})
}
