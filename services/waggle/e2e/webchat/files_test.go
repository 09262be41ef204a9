package webchat

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/waggle-os/core/libs/llmtest"
)

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

// filesDir is where a workspace's files live: the directory the agent's
// file tools and the files routes share.
func filesDir(dataDir, workspace string) string {
	return filepath.Join(dataDir, "workspaces", workspace, "files")
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFiles: browse and download the workspace's files, attach one to a
// message (it lands in the workspace through the upload route), and see
// an image the agent wrote inline — all on the server's real files routes.
func TestFiles(t *testing.T) {
	b := browser(t)
	llm := model(t, func(last string) llmtest.Response { return llmtest.Reply("got: " + last) })
	srv := start(t, llm, nil)
	dir := filesDir(srv.DataDir, ws)
	writeFile(t, filepath.Join(dir, "report.txt"), bytes.Repeat([]byte("r"), 2048))
	writeFile(t, filepath.Join(dir, "archive", "old.txt"), []byte("old"))

	ctx := tab(t, b)
	upload := filepath.Join(t.TempDir(), "hello.txt")
	if err := os.WriteFile(upload, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, open(srv.URL+"/"),
		chromedp.WaitVisible(`#files-toggle`, chromedp.ByID), chromedp.WaitVisible(`#attach`, chromedp.ByID),
		chromedp.Click(`#files-toggle`, chromedp.ByID),
		until(`[...document.querySelectorAll('#files-list .file-entry')].map(e => [...e.querySelectorAll('.name, .size')].map(x => x.textContent).join(' ')).join('|') === '📁 archive|report.txt 2.0 KB'`),
		chromedp.Click(`#files-list .file-entry button.name`, chromedp.ByQuery),
		until(`document.querySelector('#files-path').textContent === '/archive' && document.querySelector('#files-list .name').textContent === 'old.txt'`),
		chromedp.Click(`#files-list button.download`, chromedp.ByQuery),
		until(`document.querySelector('#files-list button.download').textContent === 'Downloaded'`),
		chromedp.SetUploadFiles(`#attach-input`, []string{upload}, chromedp.ByID),
		until(`document.querySelector('#input').value === '[attached: uploads/hello.txt]'`),
		chromedp.SendKeys(`#input`, "\r", chromedp.ByID),
		until(lastReplyHas("got: [attached: uploads/hello.txt]")), until(replied),
	)
	if data, err := os.ReadFile(filepath.Join(dir, "uploads", "hello.txt")); err != nil || string(data) != "hello" {
		t.Fatalf("the attached file in the workspace: %q %v", data, err)
	}
	// The open Files panel shows the upload too.
	run(t, ctx, chromedp.Click(`#files-up`, chromedp.ByID),
		until(`[...document.querySelectorAll('#files-list .name')].some(e => e.textContent === '📁 uploads')`))

	// An image the agent writes is shown under its note, from the served
	// bytes (a PNG the test puts where the agent's write_file wrote text).
	run(t, ctx, send(`please CALL write_file {"path":"pics/chart.png","content":"x"}`),
		chromedp.WaitVisible(`#messages .approval button.allow-once`, chromedp.ByQuery),
		chromedp.Click(`#messages .approval button.allow-once`, chromedp.ByQuery),
		until(lastReplyHas("Anything else?")), until(idle),
		until(`!!document.querySelector('#messages .note.file')`),
	)
	writeFile(t, filepath.Join(dir, "pics", "chart.png"), tinyPNG(t))
	// From history: the reload fetches the (now PNG) file and shows it.
	run(t, ctx, chromedp.Reload(), chromedp.WaitVisible(`body[data-ready="true"]`, chromedp.ByQuery),
		until(`(() => { const i = document.querySelector('#messages .note.file img'); return !!i && i.complete && i.naturalWidth === 4 && i.src.startsWith('blob:') && i.alt === 'pics/chart.png'; })()`),
	)
}

// TestDropUpload: a file dropped on the page (a DataTransfer holding a
// File, as a drag from the desktop gives) is uploaded through the files
// route into the workspace, attached to the message as its path, and
// shown in the chat with the agent's answer.
func TestDropUpload(t *testing.T) {
	b := browser(t)
	llm := model(t, func(last string) llmtest.Response { return llmtest.Reply("got: " + last) })
	srv := start(t, llm, nil)
	ctx := tab(t, b)
	drop := `(() => {
	  const dt = new DataTransfer();
	  dt.items.add(new File(['dropped bytes \u2713'], 'dropped notes.txt', { type: 'text/plain' }));
	  const at = document.querySelector('#messages');
	  const ev = type => new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true });
	  at.dispatchEvent(ev('dragenter'));
	  const over = ev('dragover');
	  at.dispatchEvent(over);
	  // The page takes the drag (the browser would otherwise open the file)
	  // and shows where it goes.
	  const taken = over.defaultPrevented && document.body.classList.contains('dropping');
	  const d = ev('drop');
	  at.dispatchEvent(d);
	  return taken && d.defaultPrevented && !document.body.classList.contains('dropping');
	})()`
	var taken bool
	run(t, ctx, open(srv.URL+"/"),
		chromedp.WaitVisible(`#attach`, chromedp.ByID), // the files routes answered
		chromedp.Evaluate(drop, &taken),
	)
	if !taken {
		t.Fatal("the page did not take the dragged file")
	}
	run(t, ctx,
		until(`document.querySelector('#input').value === '[attached: uploads/dropped notes.txt]'`),
		chromedp.SendKeys(`#input`, "\r", chromedp.ByID),
		until(lastReplyHas("got: [attached: uploads/dropped notes.txt]")), until(replied),
		until(`[...document.querySelectorAll('#messages .msg.user .bubble')].some(e => e.textContent === '[attached: uploads/dropped notes.txt]')`),
	)
	if data, err := os.ReadFile(filepath.Join(filesDir(srv.DataDir, ws), "uploads", "dropped notes.txt")); err != nil || string(data) != "dropped bytes ✓" {
		t.Fatalf("the dropped file in the workspace: %q %v", data, err)
	}
}
