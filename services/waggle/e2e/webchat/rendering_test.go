package webchat

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/waggle-os/core/libs/llmtest"
)

// richReply has a bit of everything the renderer draws.
var richReply = func() string {
	var long strings.Builder
	for i := 1; i <= 60; i++ {
		long.WriteString("print(\"row\", " + strings.Repeat("1", 1+i%3) + ")\n")
	}
	return "## Results\n\nThe fit gives $E = mc^2$ and costs $5 and $10 to run.\n\n" +
		"$$\\frac{a + b}{\\sqrt{x}} \\leq \\alpha_1$$\n\n" +
		"| model | score |\n| :--- | ---: |\n| small | 0.91 |\n| large | 0.97 |\n\n" +
		"```go\nfunc main() {\n\t// say hi\n\tfmt.Println(\"hi <script>alert(1)</script>\", 42)\n}\n```\n\n" +
		"```python\ndef f(x):\n    return x * 2  # double\n```\n\n" +
		"```python\n" + long.String() + "```\n\nTHE END"
}()

// TestRendering: code is coloured (and still exactly its text), math is
// drawn, tables keep their alignment, long code is folded; and the page
// is photographed at desktop and phone width, light and dark.
func TestRendering(t *testing.T) {
	b := browser(t)
	llm := model(t, func(string) llmtest.Response { return llmtest.Reply(richReply[:40], richReply[40:]) })
	srv := start(t, llm, nil)

	t.Run("CodeMathTablesFolding", func(t *testing.T) {
		ctx := tab(t, b)
		run(t, ctx, open(srv.URL+"/"), send("show me everything"), until(lastReplyHas("THE END")), until(replied))
		var got struct {
			GoText    string   `json:"goText"`
			Keywords  []string `json:"keywords"`
			Strings   []string `json:"strings"`
			Comments  []string `json:"comments"`
			Numbers   []string `json:"numbers"`
			PyKw      []string `json:"pyKw"`
			Scripts   int      `json:"scripts"`
			Math      []string `json:"math"`
			Frac      int      `json:"frac"`
			Sup       string   `json:"sup"`
			Para      string   `json:"para"`
			Align     []string `json:"align"`
			Folded    int      `json:"folded"`
			FoldLabel string   `json:"foldLabel"`
		}
		run(t, ctx, chromedp.Evaluate(`(() => {
		  const m = [...document.querySelectorAll('#messages .msg.assistant')].pop();
		  const blocks = [...m.querySelectorAll('.code-block')];
		  const all = (root, sel) => [...root.querySelectorAll(sel)].map(e => e.textContent);
		  return { goText: blocks[0].querySelector('code').textContent,
		    keywords: all(blocks[0], '.tok-kw'), strings: all(blocks[0], '.tok-str'), comments: all(blocks[0], '.tok-com'), numbers: all(blocks[0], '.tok-num'),
		    pyKw: all(blocks[1], '.tok-kw'), scripts: document.querySelectorAll('#messages script').length,
		    math: all(m, '.math'), frac: m.querySelectorAll('.math .frac').length, sup: (m.querySelector('.math sup') || {}).textContent || '',
		    para: m.querySelector('.md p').textContent,
		    align: [...m.querySelectorAll('table tr:nth-child(2) td')].map(td => td.style.textAlign),
		    folded: m.querySelectorAll('.folded').length, foldLabel: (m.querySelector('.fold-toggle') || {}).textContent || '' };
		})()`, &got))
		wantGo := "func main() {\n\t// say hi\n\tfmt.Println(\"hi <script>alert(1)</script>\", 42)\n}"
		if got.GoText != wantGo {
			t.Fatalf("coloured code is not its source:\n%q\nwant\n%q", got.GoText, wantGo)
		}
		if strings.Join(got.Keywords, ",") != "func" || len(got.Strings) != 1 || got.Comments[0] != "// say hi" || strings.Join(got.Numbers, ",") != "42" {
			t.Fatalf("go tokens: %+v", got)
		}
		if strings.Join(got.PyKw, ",") != "def,return" || got.Scripts != 0 {
			t.Fatalf("python tokens or markup: %+v", got)
		}
		if len(got.Math) != 2 || got.Frac != 1 || got.Sup != "2" {
			t.Fatalf("math: %+v", got)
		}
		if !strings.Contains(got.Para, "costs $5 and $10 to run") {
			t.Fatalf("dollar amounts became math: %q", got.Para)
		}
		if strings.Join(got.Align, ",") != "left,right" {
			t.Fatalf("table alignment %v", got.Align)
		}
		if got.Folded != 1 || got.FoldLabel != "Show all 60 lines" {
			t.Fatalf("long code not folded: %+v", got)
		}
		run(t, ctx, chromedp.Click(`#messages .fold-toggle`, chromedp.ByQuery),
			until(`!document.querySelector('#messages .folded') && document.querySelector('#messages .fold-toggle').textContent === 'Fold'`),
			chromedp.Click(`#messages .fold-toggle`, chromedp.ByQuery),
			until(`document.querySelectorAll('#messages .folded').length === 1`),
		)
	})

	// Screenshots for the artifacts (and the docs): desktop and phone,
	// light and dark, of the same conversation.
	t.Run("Screenshots", func(t *testing.T) {
		// The conversation to photograph (when run on its own).
		if len(llm.ChatRequests()) == 0 {
			ctx := tab(t, b)
			run(t, ctx, open(srv.URL+"/"), send("show me everything"), until(lastReplyHas("THE END")), until(replied))
		}
		for _, v := range []struct {
			name string
			w, h int64
		}{{"desktop", 1280, 860}, {"phone", 390, 844}} {
			for _, dark := range []bool{false, true} {
				ctx := tab(t, b)
				mode := "light"
				if dark {
					mode = "dark"
				}
				run(t, ctx, chromedp.EmulateViewport(v.w, v.h), systemDark(dark), open(srv.URL+"/"),
					until(lastReplyHas("THE END")), until(replied),
					chromedp.Evaluate(`document.querySelector('#messages').scrollTop = 0`, nil))
				if v.name == "desktop" {
					run(t, ctx, until(`document.documentElement.scrollWidth <= 1280`))
				} else {
					run(t, ctx, until(`document.documentElement.scrollWidth <= 390`))
				}
				screenshot(t, ctx, "webchat-"+v.name+"-"+mode+".png")
			}
		}
	})
}
