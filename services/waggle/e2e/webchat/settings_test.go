package webchat

import (
	"context"
	"encoding/base64"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
)

// fakeSettings answers the tab's settings and vault requests in the
// routes' shapes (or 404 to all when missing) and records what the page
// sent, so the dialog is tested on a server with or without the routes.
type fakeSettings struct {
	mu      sync.Mutex
	sent    []string // "METHOD path body" of each write
	secrets []string
	missing bool
}

func (f *fakeSettings) answer(ctx context.Context) chromedp.Action {
	chromedp.ListenTarget(ctx, func(ev any) {
		e, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		go func() {
			u, _ := url.Parse(e.Request.URL)
			var post []byte
			for _, pe := range e.Request.PostDataEntries {
				chunk, _ := base64.StdEncoding.DecodeString(pe.Bytes)
				post = append(post, chunk...)
			}
			f.mu.Lock()
			status, body := int64(404), `{"error":"Not found"}`
			if !f.missing {
				switch m, p := e.Request.Method, u.Path; {
				case m == "GET" && p == "/api/settings":
					status, body = 200, `{"defaultModel":"claude-sonnet-4-6","fallbackModel":null,"budgetModel":null,"budgetThreshold":0.8,"providers":{},"litellmUrl":"http://x","dailyBudget":5,"budgetHardCap":false,"onboardingCompleted":true}`
				case m == "GET" && p == "/api/settings/permissions":
					status, body = 200, `{"defaultAutonomy":"normal","externalGates":[],"workspaceOverrides":{}}`
				case m == "GET" && p == "/api/vault":
					list := []string{}
					for _, s := range f.secrets {
						list = append(list, `{"name":"`+s+`","type":"api_key","updatedAt":"2026-01-01T00:00:00Z","isCommon":true}`)
					}
					status, body = 200, `{"secrets":[`+strings.Join(list, ",")+`],"suggestedKeys":[],"suggestedSecrets":[]}`
				case m == "POST" && p == "/api/vault" && strings.Contains(string(post), `"name":"bad name"`):
					status, body = 400, `{"error":"Invalid secret name","code":"INVALID_INPUT"}`
				case m == "POST" && p == "/api/vault":
					f.secrets = append(f.secrets, "openai")
					status, body = 200, `{"success":true,"name":"openai"}`
				default:
					status, body = 200, `{"updated":true}`
				}
				if e.Request.Method != "GET" {
					f.sent = append(f.sent, e.Request.Method+" "+u.Path+" "+string(post))
				}
			}
			f.mu.Unlock()
			c := chromedp.FromContext(ctx)
			_ = fetch.FulfillRequest(e.RequestID, status).
				WithResponseHeaders([]*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}}).
				WithBody(base64.StdEncoding.EncodeToString([]byte(body))).Do(cdp.WithExecutor(ctx, c.Target))
		}()
	})
	return fetch.Enable().WithPatterns([]*fetch.RequestPattern{{URLPattern: "*/api/settings*"}, {URLPattern: "*/api/vault*"}})
}

func (f *fakeSettings) writes() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.sent, "\n")
}

// TestSettings: models and budget, default autonomy, an API key into the
// vault (its value sent once, never shown), and the MCP servers' state
// from the real server; without the settings routes only MCP is shown.
func TestSettings(t *testing.T) {
	b := browser(t)
	srv := start(t, nil, nil)

	t.Run("Edit", func(t *testing.T) {
		f := &fakeSettings{}
		ctx := tab(t, b)
		run(t, ctx, f.answer(ctx), open(srv.URL+"/"),
			chromedp.Click(`#settings-button`, chromedp.ByID),
			chromedp.WaitVisible(`#settings-models`, chromedp.ByID),
			until(`document.querySelector('#settings-default-model').value === 'claude-sonnet-4-6' && document.querySelector('#settings-budget').value === '5'`),
			chromedp.WaitVisible(`#settings-autonomy`, chromedp.ByID),
			chromedp.WaitVisible(`#settings-mcp`, chromedp.ByID),
			until(`document.querySelector('#settings-mcp-list').textContent === 'No MCP servers configured.'`),
			chromedp.Evaluate(`document.querySelector('#settings-budget').value = '2.5'`, nil),
			chromedp.Click(`#settings-hard-cap`, chromedp.ByID),
			chromedp.Click(`#settings-models button[type=submit]`, chromedp.ByQuery),
			chromedp.WaitVisible(`#settings-models .saved`, chromedp.ByQuery),
			chromedp.SetValue(`#settings-autonomy-level`, "trusted", chromedp.ByID),
			chromedp.Click(`#settings-autonomy button[type=submit]`, chromedp.ByQuery),
			chromedp.WaitVisible(`#settings-autonomy .saved`, chromedp.ByQuery),
			// A refusal is shown in the dialog, in the server's words.
			chromedp.SendKeys(`#settings-vault-name`, "bad name", chromedp.ByID),
			chromedp.SendKeys(`#settings-vault-value`, "v", chromedp.ByID),
			chromedp.Click(`#settings-vault-form button[type=submit]`, chromedp.ByQuery),
			chromedp.WaitVisible(`#settings-error`, chromedp.ByID),
			until(`document.querySelector('#settings-error').textContent === '400 · Invalid secret name (INVALID_INPUT)'`),
			chromedp.Evaluate(`document.querySelector('#settings-vault-name').value = ''; document.querySelector('#settings-vault-value').value = ''`, nil),
			chromedp.SendKeys(`#settings-vault-name`, "openai", chromedp.ByID),
			chromedp.SendKeys(`#settings-vault-value`, "sk-test-123", chromedp.ByID),
			chromedp.Click(`#settings-vault-form button[type=submit]`, chromedp.ByQuery),
			until(`document.querySelector('#settings-vault-list .name') && document.querySelector('#settings-vault-list .name').textContent === 'openai'`),
			until(`!document.querySelector('#settings-dialog').textContent.includes('sk-test-123') && document.querySelector('#settings-vault-value').value === ''`),
		)
		screenshot(t, ctx, "webchat-settings.png")
		w := f.writes()
		for _, want := range []string{
			`PUT /api/settings {"budgetHardCap":true,"dailyBudget":2.5,"defaultModel":"claude-sonnet-4-6"}`,
			`PUT /api/settings/permissions {"defaultAutonomy":"trusted"}`,
			`POST /api/vault {"name":"openai","value":"sk-test-123"}`,
		} {
			if !strings.Contains(w, want) {
				t.Fatalf("the page did not send %s; it sent:\n%s", want, w)
			}
		}
	})

	t.Run("HiddenWithoutRoutes", func(t *testing.T) {
		f := &fakeSettings{missing: true}
		ctx := tab(t, b)
		run(t, ctx, f.answer(ctx), open(srv.URL+"/"),
			chromedp.Click(`#settings-button`, chromedp.ByID),
			chromedp.WaitVisible(`#settings-mcp`, chromedp.ByID),
			until(`['settings-models', 'settings-autonomy', 'settings-vault'].every(id => document.getElementById(id).hidden)`),
			until(`document.querySelector('#error').hidden`),
		)
	})
}
