package webchat

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/waggle-os/core/libs/llmtest"
)

// TestModelPicker: the model server's list (GET /api/litellm/models, from
// its /v1/models) fills the picker, the pick is what the model server is
// asked for and is remembered; a server whose model list is empty (echo
// mode: no model server) keeps the picker hidden, with no error.
func TestModelPicker(t *testing.T) {
	b := browser(t)

	t.Run("Picks", func(t *testing.T) {
		llm := llmtest.New(llmtest.WithModels("claude-haiku-3-5", "claude-sonnet-4-6"),
			llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
				return llmtest.Reply("answered by " + r.Chat.Model)
			}))
		llm.Start()
		t.Cleanup(llm.Close)
		srv := start(t, llm, nil)
		ctx := tab(t, b)
		run(t, ctx, open(srv.URL+"/"),
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

	t.Run("HiddenWithoutModels", func(t *testing.T) {
		srv := start(t, nil, nil) // echo mode: the models route lists nothing
		ctx := tab(t, b)
		run(t, ctx, open(srv.URL+"/"),
			chromedp.Evaluate(`localStorage.setItem('waggle.model', '"claude-haiku-3-5"')`, nil),
			chromedp.Reload(), chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
			send("which model now?"), until(replied), until(lastReplyHas("which model now?")),
			// The page asked, got an empty list and kept the picker hidden.
			until(`document.querySelector('#model').dataset.loaded === 'true'`),
			until(`document.querySelector('#model').hidden && document.querySelector('#error').hidden`),
		)
	})
}
