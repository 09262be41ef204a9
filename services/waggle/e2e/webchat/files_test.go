package webchat

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/waggle-os/core/libs/llmtest"
)

// fakeFiles answers the tab's workspace file requests in the original's
// shapes (GET …/files/list?path= → [{name, path, type, size}], POST
// …/files/upload {path, name, data} → 201 entry, GET …/files/download?path=
// → the bytes), or 404 to every one when missing is set: the page is
// tested against the routes' contract on any branch, with or without them.
type fakeFiles struct {
	mu      sync.Mutex
	seen    []string // method and path?query of each request
	uploads []string // the JSON bodies of uploads
	png     []byte
	missing bool
}

func (f *fakeFiles) answer(ctx context.Context) chromedp.Action {
	chromedp.ListenTarget(ctx, func(ev any) {
		e, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		go func() {
			u, _ := url.Parse(e.Request.URL)
			f.mu.Lock()
			f.seen = append(f.seen, e.Request.Method+" "+u.Path+"?"+u.RawQuery)
			status, ctype, body := int64(404), "application/json", []byte(`{"error":"Not found"}`)
			if !f.missing {
				switch {
				case strings.HasSuffix(u.Path, "/files/list") && u.Query().Get("path") == "/":
					status, body = 200, []byte(`[{"name":"uploads","path":"/uploads","type":"directory"},{"name":"report.txt","path":"/report.txt","type":"file","size":2048}]`)
				case strings.HasSuffix(u.Path, "/files/list"):
					status, body = 200, []byte(`[{"name":"hello.txt","path":"/uploads/hello.txt","type":"file","size":5}]`)
				case strings.HasSuffix(u.Path, "/files/upload"):
					var post []byte
					for _, pe := range e.Request.PostDataEntries {
						chunk, _ := base64.StdEncoding.DecodeString(pe.Bytes)
						post = append(post, chunk...)
					}
					f.uploads = append(f.uploads, string(post))
					status, body = 201, []byte(`{"name":"hello.txt","path":"/uploads/hello.txt","type":"file","size":5}`)
				case strings.HasSuffix(u.Path, "/files/download") && strings.HasSuffix(u.Query().Get("path"), ".png"):
					status, ctype, body = 200, "image/png", f.png
				case strings.HasSuffix(u.Path, "/files/download"):
					status, ctype, body = 200, "text/plain", []byte("hello")
				}
			}
			f.mu.Unlock()
			c := chromedp.FromContext(ctx)
			_ = fetch.FulfillRequest(e.RequestID, status).
				WithResponseHeaders([]*fetch.HeaderEntry{{Name: "Content-Type", Value: ctype}}).
				WithBody(base64.StdEncoding.EncodeToString(body)).Do(cdp.WithExecutor(ctx, c.Target))
		}()
	})
	return fetch.Enable().WithPatterns([]*fetch.RequestPattern{{URLPattern: "*/api/workspaces/*/files/*"}})
}

func (f *fakeFiles) saw(s string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.seen {
		if strings.Contains(r, s) {
			return true
		}
	}
	return false
}

func tinyPNG(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	for x := 0; x < 4; x++ {
		img.Set(x, 1, color.RGBA{200, 120, 0, 255})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFiles: browse and download the workspace's files, attach one to a
// message, and see an image the agent wrote inline; without the routes,
// none of it is offered.
func TestFiles(t *testing.T) {
	b := browser(t)
	llm := model(t, func(last string) llmtest.Response { return llmtest.Reply("got: " + last) })
	srv := start(t, llm, nil)

	t.Run("BrowseUploadAndImages", func(t *testing.T) {
		files := &fakeFiles{png: tinyPNG(t)}
		ctx := tab(t, b)
		upload := filepath.Join(t.TempDir(), "hello.txt")
		if err := os.WriteFile(upload, []byte("hello"), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, files.answer(ctx), open(srv.URL+"/"),
			chromedp.WaitVisible(`#files-toggle`, chromedp.ByID), chromedp.WaitVisible(`#attach`, chromedp.ByID),
			chromedp.Click(`#files-toggle`, chromedp.ByID),
			until(`[...document.querySelectorAll('#files-list .file-entry')].map(e => e.querySelector('.name').textContent).join('|') === '📁 uploads|report.txt'`),
			chromedp.Click(`#files-list .file-entry button.name`, chromedp.ByQuery),
			until(`document.querySelector('#files-path').textContent === '/uploads' && document.querySelector('#files-list .name').textContent === 'hello.txt'`),
			chromedp.Click(`#files-list button.download`, chromedp.ByQuery),
			until(`document.querySelector('#files-list button.download').textContent === 'Downloaded'`),
			chromedp.SetUploadFiles(`#attach-input`, []string{upload}, chromedp.ByID),
			until(`document.querySelector('#input').value === '[attached: uploads/hello.txt]'`),
			chromedp.SendKeys(`#input`, "\r", chromedp.ByID),
			until(lastReplyHas("got: [attached: uploads/hello.txt]")), until(replied),
		)
		if !files.saw("GET /api/workspaces/default/files/download?path=%2Fuploads%2Fhello.txt") {
			t.Fatalf("download requests: %v", files.seen)
		}
		files.mu.Lock()
		up := strings.Join(files.uploads, "")
		files.mu.Unlock()
		if !strings.Contains(up, `"name":"hello.txt"`) || !strings.Contains(up, `"data":"aGVsbG8="`) || !strings.Contains(up, `"path":"/uploads"`) {
			t.Fatalf("upload body %q", up)
		}
		// An image the agent writes is shown under its note, from the
		// served bytes.
		run(t, ctx, send(`please CALL write_file {"path":"pics/chart.png","content":"x"}`),
			chromedp.WaitVisible(`#messages .approval button.allow-once`, chromedp.ByQuery),
			chromedp.Click(`#messages .approval button.allow-once`, chromedp.ByQuery),
			until(lastReplyHas("Anything else?")), until(idle),
			until(`(() => { const i = document.querySelector('#messages .note.file img'); return !!i && i.complete && i.naturalWidth === 4 && i.src.startsWith('blob:') && i.alt === 'pics/chart.png'; })()`),
			// From history too.
			chromedp.Reload(), chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
			until(`(() => { const i = document.querySelector('#messages .note.file img'); return !!i && i.complete && i.naturalWidth === 4; })()`),
		)
	})

	t.Run("HiddenWithoutRoutes", func(t *testing.T) {
		files := &fakeFiles{missing: true}
		ctx := tab(t, b)
		run(t, ctx, files.answer(ctx), open(srv.URL+"/"),
			until(lastReplyHas("Anything else?")),
			until(`document.querySelector('#files-toggle').hidden && document.querySelector('#attach').hidden && document.querySelector('#error').hidden`),
			until(`!document.querySelector('#messages img')`),
		)
	})
}
