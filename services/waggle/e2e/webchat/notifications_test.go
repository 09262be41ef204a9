package webchat

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestNotifications: the server's notifications (GET
// /api/notifications/stream) and an approval waiting in another session
// reach the user as toasts, as text.
func TestNotifications(t *testing.T) {
	b := browser(t)
	llm := model(t, func(last string) llmtest.Response { return llmtest.Reply("ok: " + last) })
	srv := start(t, llm, func(c *app.Config) { c.NATSListen = waggletest.FreeAddr(t) })

	// A runner announces a turn that finished with nobody watching (as
	// services/turnrunner/turn/notify.go does, here with hostile text): the
	// page shows it as text, and its Open button shows that session.
	t.Run("ServerNotification", func(t *testing.T) {
		var s struct{ ID string }
		if st := srv.JSON(http.MethodPost, "/api/workspaces/"+ws+"/sessions", map[string]any{}, &s); st != 200 && st != 201 {
			t.Fatalf("create session: %d", st)
		}
		st := srv.Chat(map[string]any{"message": "background work", "workspace": ws, "session": s.ID})
		st.All(t)
		st.Close()

		ctx := tab(t, b)
		run(t, ctx, open(srv.URL+"/"), until(`document.body.dataset.notifications === 'connected'`))
		nc := srv.DialNATS()
		n := protocol.Notification{ID: protocol.NewUUID(), Type: "notification", Title: "Agent finished",
			Body: "<b>not markup</b>", Category: protocol.NotifyAgent, Timestamp: protocol.Timestamp(time.Now()),
			Workspace: ws, Session: s.ID}
		if err := bus.Publish(nc, protocol.Notifications, n); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		run(t, ctx,
			until(`[...document.querySelectorAll('#toasts .toast')].some(e => e.textContent.includes('Agent finished') && e.querySelector('.toast-body').textContent === '<b>not markup</b>')`),
			until(`document.querySelectorAll('#toasts b').length === 0`),
			until(`(() => { const t = [...document.querySelectorAll('#toasts .toast')].find(e => e.textContent.includes('Agent finished'));
				const b = t && t.querySelector('.toast-action'); if (b) b.click(); return !!b; })()`),
			until(lastReplyHas("ok: background work")),
			until(`document.querySelector('#messages .msg.user .bubble').textContent === 'background work'`),
		)
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
