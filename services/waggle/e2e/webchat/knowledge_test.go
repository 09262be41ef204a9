package webchat

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/app"
)

// hostile is an entity name the extraction model made up. The store
// drops its event attribute (frames.Sanitise) but keeps the tag: on the
// page what is stored must be text, never an element.
const hostile, stored = `<img src=x onerror=alert(1)>`, `<img src=x>`

// TestKnowledgePanel: what a conversation taught the knowledge graph is
// listed in the memory panel with its relations, page by page; a name
// from the model stays text; Retire takes an entity off the list and out
// of the graph.
func TestKnowledgePanel(t *testing.T) {
	const budget = "cheap-extractor"
	b := browser(t)
	llm := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		if r.Chat.Model == budget && strings.Contains(string(r.RawBody), "You extract a knowledge graph") {
			return llmtest.Reply(`{"entities":[{"name":` + js(hostile) + `,"type":"person"},{"name":"Ada Lovelace","type":"person"}],` +
				`"relations":[{"from":` + js(hostile) + `,"to":"Ada Lovelace","type":"knows","confidence":0.9}]}`)
		}
		return llmtest.Reply("Noted.")
	}))
	llm.Start()
	t.Cleanup(llm.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"budgetModel":"`+budget+`","knowledgeExtraction":"model","gepa":false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, llm, func(c *app.Config) { c.DataDir = dir })

	type entity struct{ ID, Name string }
	graph := func() (ents []entity, rels []string) {
		var g struct {
			Entities  []entity
			Relations []struct{ Source, Target, Relationship string }
		}
		if st := srv.JSON(http.MethodGet, "/api/memory/graph?workspace="+ws, nil, &g); st != 200 {
			t.Fatalf("graph: %d", st)
		}
		names := map[string]string{}
		for _, e := range g.Entities {
			names[e.ID] = e.Name
		}
		for _, r := range g.Relations {
			rels = append(rels, names[r.Source]+" "+r.Relationship+" "+names[r.Target])
		}
		return g.Entities, rels
	}
	has := func(rels []string, want string) bool {
		for _, r := range rels {
			if r == want {
				return true
			}
		}
		return false
	}

	ctx := tab(t, b)
	run(t, ctx, open(srv.URL+"/"),
		// A page that ran the name as markup would call this.
		chromedp.Evaluate(`window.alert = () => { window.alerted = true; }`, nil),
		send("Ada Lovelace leads Project Falcon at Acme Corp."), until(replied))
	// Extraction runs after the turn, off its path: the panel is opened
	// once the rules' and the model's findings are stored.
	waitfor.NoError(t, "the turn's entities and relations in the graph", func() error {
		ents, rels := graph()
		if len(ents) < 4 || !has(rels, "Ada Lovelace leads Project Falcon") || !has(rels, stored+" knows Ada Lovelace") {
			return fmt.Errorf("graph has %v and %v", ents, rels)
		}
		return nil
	})

	names := `[...document.querySelectorAll('#knowledge-list .entity-name')].map(e => e.textContent)`
	lines := `[...document.querySelectorAll('#knowledge-list .relation')].map(e => e.textContent)`
	run(t, ctx,
		// Two entities a page, so the graph takes more than one.
		chromedp.Evaluate(`document.querySelector('#knowledge-list').dataset.pageSize = '2'`, nil),
		chromedp.Click(`#memory-toggle`, chromedp.ByID),
		chromedp.WaitVisible(`#memory`, chromedp.ByID),
		until(names+`.length === 2`),
		chromedp.WaitVisible(`#knowledge-more`, chromedp.ByID),
		// More, while the server says more follow (a click disables the
		// button until its page is drawn).
		until(`(m => { if (m.hidden) return true; if (!m.disabled) m.click(); return false; })(document.querySelector('#knowledge-more'))`),
		until(names+`.length >= 4`),
		until(`(n => n.includes('Ada Lovelace') && n.includes('Project Falcon') && n.includes(`+js(stored)+`))(`+names+`)`),
		// The server sends the relations among a page's entities: the
		// whole graph on one page has them all.
		chromedp.Click(`#memory-toggle`, chromedp.ByID), until(`document.querySelector('#memory').hidden`),
		chromedp.Evaluate(`delete document.querySelector('#knowledge-list').dataset.pageSize`, nil),
		chromedp.Click(`#memory-toggle`, chromedp.ByID),
		until(`document.querySelector('#knowledge-more').hidden && `+names+`.length >= 4`),
		until(lines+`.includes('Ada Lovelace — leads → Project Falcon')`),
		until(lines+`.includes(`+js(stored+" — knows → Ada Lovelace")+`)`),
		// Ada was named by the rules and by the model.
		until(`[...document.querySelectorAll('#knowledge-list .entity')].some(li =>
		  li.querySelector('.entity-name').textContent === 'Ada Lovelace' &&
		  li.querySelector('.entity-type').textContent === 'person' &&
		  li.querySelector('.entity-mentions').textContent === '2 mentions')`),
	)
	var imgs int
	var alerted bool
	run(t, ctx, chromedp.Evaluate(`document.querySelectorAll('#memory img').length`, &imgs),
		chromedp.Evaluate(`window.alerted === true`, &alerted))
	if imgs != 0 || alerted {
		t.Fatalf("the model's entity name became markup: %d img elements, alert called %v", imgs, alerted)
	}
	screenshot(t, ctx, "webchat-knowledge.png")

	// Retire takes Project Falcon and its relation off the list, and the
	// graph no longer holds them as valid.
	retire := `[...document.querySelectorAll('#knowledge-list .entity')].find(li =>
	  li.querySelector('.entity-name').textContent === 'Project Falcon').querySelector('button.retire').click()`
	run(t, ctx, chromedp.Evaluate(retire, nil),
		until(`!`+names+`.includes('Project Falcon')`),
		until(`!`+lines+`.some(l => l.includes('Project Falcon'))`),
	)
	ents, rels := graph()
	for _, e := range ents {
		if e.Name == "Project Falcon" {
			t.Fatalf("Project Falcon is still valid after Retire: %v", ents)
		}
	}
	if has(rels, "Ada Lovelace leads Project Falcon") {
		t.Fatalf("the leads relation is still valid after Retire: %v", rels)
	}
	// Undo restores it with the relation retired with it.
	run(t, ctx,
		until(`document.querySelector('#knowledge-list li.retired').textContent.startsWith('Retired “Project Falcon”.')`),
		chromedp.Click(`#knowledge-list li.retired button.undo`, chromedp.ByQuery),
		until(lines+`.includes('Ada Lovelace — leads → Project Falcon')`),
		until(`!document.querySelector('#knowledge-list li.retired')`),
	)
	if _, rels = graph(); !has(rels, "Ada Lovelace leads Project Falcon") {
		t.Fatalf("Undo did not restore the leads relation: %v", rels)
	}
	run(t, ctx, chromedp.Evaluate(retire, nil), until(`!`+names+`.includes('Project Falcon')`))
	// A fresh look (the panel closed and opened) agrees with the server.
	run(t, ctx,
		chromedp.Click(`#memory-toggle`, chromedp.ByID), until(`document.querySelector('#memory').hidden`),
		chromedp.Click(`#memory-toggle`, chromedp.ByID),
		until(`(n => n.includes('Ada Lovelace') && !n.includes('Project Falcon'))(`+names+`)`),
	)
}
