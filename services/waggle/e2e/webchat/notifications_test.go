package webchat

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/waggle-os/core/libs/llmtest"
)

// answerNotifications answers the tab's GET /api/notifications/stream
// with status and body (an event stream in the original's shape, or a
// 404 as from a server without the route).
func answerNotifications(ctx context.Context, status int64, ctype, body string) chromedp.Action {
	chromedp.ListenTarget(ctx, func(ev any) {
		e, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		go func() {
			c := chromedp.FromContext(ctx)
			_ = fetch.FulfillRequest(e.RequestID, status).
				WithResponseHeaders([]*fetch.HeaderEntry{{Name: "Content-Type", Value: ctype}}).
				WithBody(base64.StdEncoding.EncodeToString([]byte(body))).Do(cdp.WithExecutor(ctx, c.Target))
		}()
	})
	return fetch.Enable().WithPatterns([]*fetch.RequestPattern{{URLPattern: "*/api/notifications/stream*"}})
}

// TestNotifications: the server's notifications and an approval waiting
// in another session reach the user as toasts, as text.
func TestNotifications(t *testing.T) {
	b := browser(t)
	llm := model(t, func(string) llmtest.Response { return llmtest.Reply("ok") })
	srv := start(t, llm, nil)

	t.Run("ServerNotification", func(t *testing.T) {
		ctx := tab(t, b)
		stream := "data: {\"type\":\"connected\"}\n\n" +
			"data: {\"type\":\"notification\",\"title\":\"Backup finished\",\"body\":\"<b>not markup</b>\",\"category\":\"cron\"}\n\n"
		run(t, ctx, answerNotifications(ctx, 200, "text/event-stream", stream), open(srv.URL+"/"),
			until(`[...document.querySelectorAll('#toasts .toast')].some(e => e.textContent.includes('Backup finished') && e.querySelector('.toast-body').textContent === '<b>not markup</b>')`),
			until(`document.querySelectorAll('#toasts b').length === 0`),
			chromedp.Click(`#toasts .toast .toast-close`, chromedp.ByQuery),
		)
	})

	t.Run("QuietWithoutRoute", func(t *testing.T) {
		ctx := tab(t, b)
		run(t, ctx, answerNotifications(ctx, 404, "application/json", `{"error":"Not found"}`), open(srv.URL+"/"),
			send("hello"), until(replied),
			until(`document.querySelector('#error').hidden && document.querySelectorAll('#toasts .toast').length === 0`))
	})

	// An approval asked in another session (here by another client) is
	// announced; "Show" opens the pending list, where it can be answered.
	t.Run("ApprovalInAnotherSession", func(t *testing.T) {
		ctx := tab(t, b)
		run(t, ctx, open(srv.URL+"/"), send("hello"), until(replied))
		var s struct{ ID string }
		if st := srv.JSON(http.MethodPost, "/api/workspaces/"+ws+"/sessions", map[string]any{}, &s); st != 200 && st != 201 {
			t.Fatalf("create session: %d", st)
		}
		done := make(chan string, 1)
		go func() {
			body := `{"message":"please CALL write_file {\"path\":\"notes/other.txt\",\"content\":\"x\"}","workspace":"` + ws + `","session":"` + s.ID + `"}`
			resp, err := http.Post(srv.URL+"/api/chat", "application/json", strings.NewReader(body))
			if err != nil {
				done <- err.Error()
				return
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			done <- string(data)
		}()
		run(t, ctx,
			// Found and clicked in one step: the server's own notification
			// of the same approval may re-render the toasts in between.
			until(`(() => { const t = [...document.querySelectorAll('#toasts .toast')].find(e => e.textContent.includes('Approval waiting') && e.textContent.includes('write_file'));
				const b = t && t.querySelector('.toast-action'); if (b) b.click(); return !!b; })()`),
			chromedp.WaitVisible(`#approvals-list .approval button.allow-once`, chromedp.ByQuery),
			chromedp.Click(`#approvals-list .approval button.allow-once`, chromedp.ByQuery),
		)
		select {
		case out := <-done:
			if !strings.Contains(out, "Anything else?") {
				t.Fatalf("the other session's turn: %.300s", out)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the other session's turn did not finish after the approval")
		}
	})
}
