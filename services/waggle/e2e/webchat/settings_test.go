package webchat

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestSettings: models and budget, default autonomy, an API key into the
// vault (its value sent once, never shown) and the MCP servers' state,
// through the server's own settings, permissions and vault routes: what
// the dialog saves is what the server then answers.
func TestSettings(t *testing.T) {
	b := browser(t)
	srv := start(t, nil, nil)
	if code := srv.JSON(http.MethodPut, "/api/settings", map[string]any{"defaultModel": "claude-haiku-3-5", "dailyBudget": 5}, nil); code != http.StatusOK {
		t.Fatalf("seed settings: %d", code)
	}

	ctx := tab(t, b)
	run(t, ctx, open(srv.URL+"/"),
		chromedp.Click(`#settings-button`, chromedp.ByID),
		chromedp.WaitVisible(`#settings-models`, chromedp.ByID),
		until(`document.querySelector('#settings-default-model').value === 'claude-haiku-3-5' && document.querySelector('#settings-budget').value === '5'`),
		chromedp.WaitVisible(`#settings-autonomy`, chromedp.ByID),
		until(`document.querySelector('#settings-autonomy-level').value === 'normal'`),
		chromedp.WaitVisible(`#settings-vault`, chromedp.ByID),
		until(`document.querySelector('#settings-vault-list').textContent === 'No keys stored.'`),
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
		until(`document.querySelector('#settings-error').textContent.startsWith('400 · name must be 1-128 letters')`),
		chromedp.Evaluate(`document.querySelector('#settings-vault-name').value = ''; document.querySelector('#settings-vault-value').value = ''`, nil),
		chromedp.SendKeys(`#settings-vault-name`, "openai", chromedp.ByID),
		chromedp.SendKeys(`#settings-vault-value`, "sk-test-123", chromedp.ByID),
		chromedp.Click(`#settings-vault-form button[type=submit]`, chromedp.ByQuery),
		until(`!!document.querySelector('#settings-vault-list .name') && document.querySelector('#settings-vault-list .name').textContent === 'openai'`),
		until(`!document.querySelector('#settings-dialog').textContent.includes('sk-test-123') && document.querySelector('#settings-vault-value').value === ''`),
	)
	screenshot(t, ctx, "webchat-settings.png")

	var s struct {
		DefaultModel  string
		DailyBudget   *float64
		BudgetHardCap bool
	}
	if code := srv.JSON(http.MethodGet, "/api/settings", nil, &s); code != http.StatusOK || s.DefaultModel != "claude-haiku-3-5" || s.DailyBudget == nil || *s.DailyBudget != 2.5 || !s.BudgetHardCap {
		t.Fatalf("settings after the dialog: %d %+v", code, s)
	}
	var p struct{ DefaultAutonomy string }
	if code := srv.JSON(http.MethodGet, "/api/settings/permissions", nil, &p); code != http.StatusOK || p.DefaultAutonomy != "trusted" {
		t.Fatalf("permissions after the dialog: %d %+v", code, p)
	}
	// The key is in the vault with the value typed (read back the way only
	// a local non-browser client may).
	var secret struct{ Value string }
	if code := srv.JSON(http.MethodPost, "/api/vault/openai/reveal", nil, &secret); code != http.StatusOK || secret.Value != "sk-test-123" {
		t.Fatalf("vault after the dialog: %d %+v", code, secret)
	}

	// Deleting a key asks once, then the server forgets it.
	run(t, ctx,
		chromedp.Click(`#settings-vault-list button.delete`, chromedp.ByQuery),
		until(`document.querySelector('#settings-vault-list button.delete').textContent === 'Delete it?'`),
		chromedp.Click(`#settings-vault-list button.delete`, chromedp.ByQuery),
		until(`document.querySelector('#settings-vault-list').textContent === 'No keys stored.'`),
	)
	if code := srv.JSON(http.MethodPost, "/api/vault/openai/reveal", nil, nil); code != http.StatusNotFound {
		t.Fatalf("reveal after delete: %d", code)
	}
}
