package webchat

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/waggle-os/core/libs/waitfor"
)

// TestMemoryPanel: what auto-save and the user stored can be seen,
// searched, re-weighted and forgotten from the page.
func TestMemoryPanel(t *testing.T) {
	b := browser(t)
	srv := start(t, nil, nil)
	for _, c := range []string{"Zebras sleep standing up <b>not markup</b>", "The deploy runs on Fridays"} {
		var saved struct {
			Saved   bool   `json:"saved"`
			FrameID string `json:"frameId"`
		}
		if st := srv.JSON(http.MethodPost, "/api/memory/frames", map[string]any{"content": c, "workspace": ws}, &saved); st != 200 || !saved.Saved {
			t.Fatalf("save frame: %d %+v", st, saved)
		}
	}
	type frame struct {
		ID, Content, Importance string
	}
	frames := func() []frame {
		var r struct{ Results []frame }
		if st := srv.JSON(http.MethodGet, "/api/memory/frames?workspace="+ws, nil, &r); st != 200 {
			t.Fatalf("list frames: %d", st)
		}
		return r.Results
	}
	ctx := tab(t, b)
	items := `document.querySelectorAll('#memory-list .frame').length`
	run(t, ctx, open(srv.URL+"/"), chromedp.Click(`#memory-toggle`, chromedp.ByID),
		chromedp.WaitVisible(`#memory`, chromedp.ByID),
		until(items+` === 2`),
		until(`[...document.querySelectorAll('#memory-list .frame-content')].some(e => e.textContent === 'Zebras sleep standing up <b>not markup</b>')`),
		until(`document.querySelectorAll('#memory-list b').length === 0`),
		chromedp.SendKeys(`#memory-search`, "zebras", chromedp.ByID),
		until(items+` === 1 && document.querySelector('#memory-list .frame-content').textContent.startsWith('Zebras')`),
	)
	screenshot(t, ctx, "webchat-memory.png")
	run(t, ctx,
		chromedp.SetValue(`#memory-list .frame select.importance`, "critical", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#memory-list .frame select.importance').dispatchEvent(new Event('change'))`, nil),
	)
	waitfor.True(t, "the importance change reaches the server", func() bool {
		for _, f := range frames() {
			if strings.HasPrefix(f.Content, "Zebras") {
				return f.Importance == "critical"
			}
		}
		return false
	})
	run(t, ctx,
		chromedp.Click(`#memory-list .frame button.delete`, chromedp.ByQuery),
		until(`document.querySelector('#memory-list .frame button.delete').textContent === 'Forget it?'`),
		chromedp.Click(`#memory-list .frame button.delete`, chromedp.ByQuery),
		until(items+` === 0`),
	)
	left := frames()
	if len(left) != 1 || !strings.HasPrefix(left[0].Content, "The deploy") {
		t.Fatalf("frames after delete: %+v", left)
	}
}
