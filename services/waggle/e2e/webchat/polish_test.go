package webchat

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/waggle-os/core/libs/llmtest"
)

// systemDark makes the tab's system colour preference dark (or light).
func systemDark(dark bool) chromedp.Action {
	v := "light"
	if dark {
		v = "dark"
	}
	return emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}})
}

// pageIsDark is true when the page's background is dark (luminance of the
// body's computed background below 0.2).
const pageIsDark = `(() => { const [r, g, b] = getComputedStyle(document.body).backgroundColor.match(/\d+/g).map(Number);
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255 < 0.2; })()`

// key presses one key with modifiers (a real key event, as a user's).
func key(k string, mods input.Modifier) chromedp.Action {
	return chromedp.KeyEvent(k, chromedp.KeyModifiers(mods))
}

// TestPolish covers what a first-time user notices before reading a
// single reply: theme, progress, scrolling, keys, titles, approvals,
// accessibility.
func TestPolish(t *testing.T) {
	b := browser(t)

	// The system's dark preference gives the dark page; the toggle
	// overrides it and is remembered across a reload.
	t.Run("DarkMode", func(t *testing.T) {
		srv := start(t, nil, nil)
		ctx := tab(t, b)
		run(t, ctx, systemDark(true), open(srv.URL+"/"), until(pageIsDark),
			until(`document.querySelector('#theme').getAttribute('aria-pressed') === 'true'`),
			chromedp.Click(`#theme`, chromedp.ByID), until(`!`+pageIsDark),
			until(`localStorage.getItem('waggle.theme') === '"light"'`),
			chromedp.Reload(), chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
			until(`!`+pageIsDark), until(`document.documentElement.dataset.theme === 'light'`),
			chromedp.Click(`#theme`, chromedp.ByID), until(pageIsDark),
			// A light system with a stored dark choice stays dark.
			systemDark(false), chromedp.Reload(), chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
			until(pageIsDark),
		)
		var icon string
		run(t, ctx, chromedp.Evaluate(`document.querySelector('link[rel=icon]').href`, &icon))
		if st := srv.JSON("GET", strings.TrimPrefix(icon, srv.URL), nil, nil); st != 200 {
			t.Fatalf("favicon %s: %d", icon, st)
		}
	})

	// Before the first token the reply shows a spinner; it goes when
	// text streams.
	t.Run("SpinnerBeforeFirstToken", func(t *testing.T) {
		pause := llmtest.NewPause()
		defer pause.Release()
		llm := model(t, func(string) llmtest.Response {
			return llmtest.Response{Steps: []llmtest.Step{llmtest.Wait(pause), llmtest.Content("here it comes")}}
		})
		srv := start(t, llm, nil)
		ctx := tab(t, b)
		run(t, ctx, open(srv.URL+"/"), send("take your time"),
			chromedp.WaitVisible(`#messages .msg.assistant.running .thinking .spinner`, chromedp.ByQuery),
			until(`document.querySelector('#messages .thinking').textContent.includes('Thinking')`),
		)
		pause.Release()
		run(t, ctx, until(lastReplyHas("here it comes")), until(replied),
			until(`!document.querySelector('#messages .thinking')`))
	})

	// A reader who scrolled up is not dragged down; "Latest" brings them
	// back.
	t.Run("JumpToLatest", func(t *testing.T) {
		var long strings.Builder
		for i := 1; i <= 120; i++ {
			long.WriteString("line of a long answer\n\n")
		}
		long.WriteString("THE END")
		llm := model(t, func(string) llmtest.Response { return llmtest.Reply(long.String()) })
		srv := start(t, llm, nil)
		ctx := tab(t, b)
		atBottom := `(() => { const m = document.querySelector('#messages'); return m.scrollHeight - m.scrollTop - m.clientHeight < 160; })()`
		run(t, ctx, open(srv.URL+"/"), send("a long one"), until(lastReplyHas("THE END")), until(replied),
			until(atBottom), until(`document.querySelector('#jump').hidden`),
			chromedp.Evaluate(`document.querySelector('#messages').scrollTop = 0`, nil),
			chromedp.WaitVisible(`#jump`, chromedp.ByID),
			chromedp.Click(`#jump`, chromedp.ByID),
			until(atBottom), until(`document.querySelector('#jump').hidden`),
		)
	})

	// The shortcuts listed in the help sheet do what it says.
	t.Run("KeyboardShortcuts", func(t *testing.T) {
		pause := llmtest.NewPause()
		defer pause.Release()
		llm := model(t, func(last string) llmtest.Response {
			if strings.Contains(last, "slow") {
				return llmtest.Response{Steps: []llmtest.Step{llmtest.Content("slowly"), llmtest.Wait(pause), llmtest.Content(" (finished)")}}
			}
			return llmtest.Reply("quick answer")
		})
		srv := start(t, llm, nil)
		ctx := tab(t, b)
		active := func(id string) chromedp.Action {
			return until(`document.activeElement && document.activeElement.id === ` + js(id))
		}
		blur := chromedp.Evaluate(`document.activeElement && document.activeElement.blur()`, nil)
		run(t, ctx, open(srv.URL+"/"), send("hello keys"), until(replied),
			blur, key("?", 0),
			chromedp.WaitVisible(`#help-dialog[open]`, chromedp.ByQuery),
			until(`['New chat', 'Search sessions', 'Stop', 'Focus the message box'].every(s => document.querySelector('#help-dialog').textContent.includes(s))`),
			active("help-close"),
		)
		screenshot(t, ctx, "webchat-help.png")
		run(t, ctx, key(kb.Escape, 0), until(`!document.querySelector('#help-dialog').open`),
			key("k", input.ModifierCtrl), active("search"),
			blur, key("/", 0), active("input"),
			// CDP delivers the key's character separately from the keydown
			// the page cancels (a real keyboard does not): clear it.
			chromedp.Evaluate(`document.querySelector('#input').value = ''`, nil),
			key("o", input.ModifierCtrl|input.ModifierShift),
			until(`document.querySelectorAll('#messages .msg').length === 0 && document.querySelector('#title').textContent === 'New chat'`),
			// Escape stops a running reply.
			send("be slow"), until(lastReplyHas("slowly")), key(kb.Escape, 0),
			until(`[...document.querySelectorAll('#messages .note.turn-error')].some(e => e.textContent.includes('cancelled'))`),
			until(idle),
		)
		if strings.Contains(lastText(t, ctx), "(finished)") {
			t.Fatal("Escape did not stop the reply")
		}
	})

	// Auto-titles are the first message without its Markdown.
	t.Run("CleanTitles", func(t *testing.T) {
		srv := start(t, nil, nil)
		ctx := tab(t, b)
		run(t, ctx, open(srv.URL+"/"), send("# **Fix** the `parser` [docs](http://x.io)"), until(replied),
			until(`[...document.querySelectorAll('#sessions .session .open')].some(e => e.textContent === 'Fix the parser docs')`),
			until(`document.querySelector('#title').textContent === 'Fix the parser docs'`),
		)
	})

	// A tool's result comes after the approval card that allowed it; a
	// turn stopped while its approval waits leaves the card "not answered"
	// (never "Answered") and runs nothing.
	t.Run("ApprovalOrderAndStop", func(t *testing.T) {
		llm := model(t, func(string) llmtest.Response { return llmtest.Reply("ok") })
		srv := start(t, llm, nil)
		ctx := tab(t, b)
		run(t, ctx, open(srv.URL+"/"), send(`please CALL write_file {"path":"notes/a.txt","content":"a"}`),
			chromedp.WaitVisible(`#messages .approval button.allow-once`, chromedp.ByQuery),
			chromedp.Click(`#messages .approval button.allow-once`, chromedp.ByQuery),
			until(lastReplyHas("Anything else?")), until(idle),
		)
		var after bool
		run(t, ctx, systemDark(false), chromedp.Evaluate(`(() => { const card = document.querySelector('#messages .approval');
		  const res = [...document.querySelectorAll('#messages .tool-result')].pop();
		  return !!card && !!res && !!(card.compareDocumentPosition(res) & Node.DOCUMENT_POSITION_FOLLOWING); })()`, &after))
		if !after {
			t.Fatal("the tool result is not after the approval card that allowed it")
		}
		run(t, ctx, send(`please CALL write_file {"path":"notes/b.txt","content":"b"}`),
			until(`document.querySelectorAll('#messages .approval').length === 2 && !!document.querySelectorAll('#messages .approval')[1].querySelector('button.allow-once')`),
			chromedp.Click(`#stop`, chromedp.ByID), until(idle),
			until(`document.querySelectorAll('#messages .approval')[1].querySelector('.approval-outcome').textContent === 'Not answered — the turn was stopped'`),
			until(`!document.querySelectorAll('#messages .approval')[1].querySelector('button')`),
			until(`document.querySelectorAll('#messages .approval')[0].querySelector('.approval-outcome').textContent === 'Allowed once'`),
		)
		if _, err := os.Stat(filepath.Join(srv.DataDir, "workspaces", ws, "files", "notes", "b.txt")); err == nil {
			t.Fatal("the unanswered call ran")
		}
		// The pending list's poll must not relabel it later.
		run(t, ctx, chromedp.Click(`#approvals-toggle`, chromedp.ByID), until(`document.querySelector('#approvals-count').textContent === '0'`),
			until(`document.querySelectorAll('#messages .approval')[1].querySelector('.approval-outcome').textContent === 'Not answered — the turn was stopped'`))
	})

	// Every control has a name, nothing jumps the tab order, and text
	// keeps a 4.5:1 contrast in both themes (WCAG AA for body text).
	t.Run("Accessibility", func(t *testing.T) {
		llm := model(t, func(string) llmtest.Response { return llmtest.Reply(richReply) })
		srv := start(t, llm, nil)
		ctx := tab(t, b)
		run(t, ctx, open(srv.URL+"/"), send("show me everything"), until(lastReplyHas("THE END")), until(replied))
		for _, dark := range []bool{false, true} {
			run(t, ctx, systemDark(dark))
			var problems []string
			run(t, ctx, chromedp.Evaluate(a11yAudit, &problems))
			if len(problems) > 0 {
				t.Fatalf("dark=%v: %d accessibility problems:\n%s", dark, len(problems), strings.Join(problems, "\n"))
			}
		}
		// The audit itself sees a problem when there is one.
		var planted []string
		run(t, ctx, systemDark(false), chromedp.Evaluate(`(() => { const s = document.createElement('span'); s.textContent = 'faint words';
		  s.style.color = '#999'; document.querySelector('#messages .msg.assistant .md p').append(s); })()`, nil),
			chromedp.Evaluate(a11yAudit, &planted))
		if len(planted) != 1 || !strings.Contains(planted[0], "faint words") {
			t.Fatalf("the audit missed a planted low-contrast text: %v", planted)
		}
	})
}

// lastText is the last reply's text.
func lastText(t *testing.T, ctx context.Context) string {
	t.Helper()
	var s string
	run(t, ctx, chromedp.Evaluate(`(() => { const m = [...document.querySelectorAll('#messages .msg.assistant')].pop(); return m ? m.textContent : ''; })()`, &s))
	return s
}

// a11yAudit lists every visible control without an accessible name, any
// positive tabindex, and every visible piece of text whose colour has
// less than 4.5:1 contrast with the background behind it.
const a11yAudit = `(() => {
  const out = [];
  const visible = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; };
  const name = e => (e.getAttribute('aria-label') || (e.labels && e.labels[0] && e.labels[0].textContent) || e.title || (e.tagName !== 'SELECT' && e.textContent) || e.placeholder || '').trim();
  for (const e of document.querySelectorAll('button, input, select, textarea, a[href]')) {
    if (!visible(e)) continue;
    if (!name(e) && !(e.tagName === 'SELECT' && e.getAttribute('aria-label'))) out.push('no name: ' + e.outerHTML.slice(0, 80));
  }
  for (const e of document.querySelectorAll('[tabindex]')) if (e.tabIndex > 0) out.push('positive tabindex: ' + e.outerHTML.slice(0, 80));
  const rgba = s => { const m = s.match(/[\d.]+/g) || [0, 0, 0, 0]; return m.map(Number).concat(m.length < 4 ? [1] : []); };
  const lum = ([r, g, b]) => { const f = c => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const background = e => {
    const layers = [];
    for (let n = e; n; n = n.parentElement) {
      const c = rgba(getComputedStyle(n).backgroundColor);
      if (c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let acc = [255, 255, 255];
    for (const c of layers.reverse()) acc = acc.map((v, i) => v * (1 - c[3]) + c[i] * c[3]);
    return acc;
  };
  const seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    const e = t.parentElement;
    if (!t.textContent.trim() || !e || seen.has(e) || !visible(e) || e.closest('[hidden], dialog:not([open]), button:disabled, option')) continue;
    seen.add(e);
    const s = getComputedStyle(e);
    if (Number(s.opacity) < 1) continue;
    const fg = rgba(s.color), bg = background(e);
    const mixed = fg.slice(0, 3).map((v, i) => v * fg[3] + bg[i] * (1 - fg[3]));
    const [hi, lo] = [lum(mixed), lum(bg)].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    if (ratio < 4.5) out.push(ratio.toFixed(2) + ':1 ' + e.tagName.toLowerCase() + '.' + e.className + ' "' + t.textContent.trim().slice(0, 30) + '"');
  }
  return out;
})()`
