package desktop

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

// formPart is one part of a test form: a file when filename is set.
type formPart struct {
	field, filename string
	data            []byte
}

// form encodes parts as the browser's FormData does (the filename is
// written as given, so a test can send one a browser would not).
func form(t *testing.T, parts ...formPart) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		disp := `form-data; name="` + p.field + `"`
		if p.filename != "" {
			disp += `; filename="` + p.filename + `"`
			h.Set("Content-Type", "application/octet-stream")
		}
		h.Set("Content-Disposition", disp)
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(p.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return mw.FormDataContentType(), buf.Bytes()
}

// postForm sends a form to url with header name/value pairs.
func postForm(t *testing.T, url, ctype string, payload io.Reader, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, payload)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp.StatusCode, body(t, resp)
}

// TestUploadAsTheOriginalAppSendsIt: the original app uploads with
// FormData ("file", then "path"); the route writes it byte for byte into
// the workspace and answers the entry. Several files are written
// together; a form from another site's page, a name that is a path, a
// directory out of the workspace, a form over 5 MiB, an unknown field and
// a form on another route are refused, and none of them writes a byte
// (nor spills the form to temporary files).
func TestUploadAsTheOriginalAppSendsIt(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where a form spilled to disk would land
	srv := waggletest.Start(t)
	url := srv.URL + "/api/workspaces/desk/files/upload"
	own := []string{"Origin", srv.URL, "Sec-Fetch-Site", "same-origin"}
	dir := filepath.Join(srv.DataDir, "workspaces", "desk", "files")

	// Bytes a naive parser trips on: CRLFs, dashes, a boundary-like line.
	report := []byte("--not-the-boundary\r\n\r\nline 1\r\n--\x00\xff end\r\n")
	ctype, b := form(t, formPart{field: "file", filename: "report.bin", data: report}, formPart{field: "path", data: []byte("/inbox")})
	code, out := postForm(t, url, ctype, bytes.NewReader(b), own...)
	var e fileEntry
	if code != http.StatusCreated || json.Unmarshal([]byte(out), &e) != nil || e.Path != "/inbox/report.bin" || e.Size != int64(len(report)) {
		t.Fatalf("the app's upload: %d %s", code, out)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "inbox", "report.bin")); err != nil || !bytes.Equal(got, report) {
		t.Fatalf("on disk: %q %v", got, err)
	}

	// Two files and no path: both at the root, an array of entries.
	ctype, b = form(t, formPart{field: "file", filename: "a.txt", data: []byte("A")}, formPart{field: "file", filename: "b.txt", data: []byte("BB")})
	var entries []fileEntry
	if code, out := postForm(t, url, ctype, bytes.NewReader(b), own...); code != http.StatusCreated || json.Unmarshal([]byte(out), &entries) != nil ||
		len(entries) != 2 || entries[0].Path != "/a.txt" || entries[1].Path != "/b.txt" {
		t.Fatalf("two files: %d %s", code, out)
	}

	// The limit is on the files together, and a file of exactly 5 MiB fits.
	ctype, b = form(t, formPart{field: "file", filename: "limit.bin", data: bytes.Repeat([]byte("y"), 5<<20)}, formPart{field: "path", data: []byte("/big")})
	if code, out := postForm(t, url, ctype, bytes.NewReader(b), own...); code != http.StatusCreated {
		t.Fatalf("a 5 MiB file: %d %s", code, out)
	}

	refused := []struct {
		name    string
		parts   []formPart
		headers []string
		want    int
		text    string
	}{
		{"a name that is a path", []formPart{{field: "file", filename: "../../../escape.txt", data: []byte("x")}}, own, 400, "name must be a file name"},
		{"a Windows path as the name", []formPart{{field: "file", filename: `C:\\Users\\ada\\escape.txt`, data: []byte("x")}}, own, 400, "name must be a file name"},
		{"a directory out of the workspace", []formPart{{field: "file", filename: "escape.txt", data: []byte("x")}, {field: "path", data: []byte("../..")}}, own, 400, ""},
		{"no file", []formPart{{field: "path", data: []byte("/inbox")}}, own, 400, "Missing file in upload"},
		{"an unknown field", []formPart{{field: "file", filename: "c.txt", data: []byte("x")}, {field: "overwrite", data: []byte("true")}}, own, 400, "unknown form field"},
		{"two paths", []formPart{{field: "file", filename: "c.txt", data: []byte("x")}, {field: "path", data: []byte("/")}, {field: "path", data: []byte("/x")}}, own, 400, "twice"},
		{"one name twice", []formPart{{field: "file", filename: "c.txt", data: []byte("x")}, {field: "file", filename: "c.txt", data: []byte("y")}}, own, 400, "twice"},
		{"over 5 MiB in two files", []formPart{{field: "file", filename: "c.txt", data: bytes.Repeat([]byte("x"), 3<<20)}, {field: "file", filename: "d.txt", data: bytes.Repeat([]byte("x"), 3<<20)}}, own, 413, "File exceeds 5MB limit"},
		{"another site's page", []formPart{{field: "file", filename: "c.txt", data: []byte("x")}}, []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, 403, ""},
		{"another port of this host", []formPart{{field: "file", filename: "c.txt", data: []byte("x")}}, []string{"Origin", "http://127.0.0.1:1", "Sec-Fetch-Site", "same-site"}, 403, ""},
		{"a page that sends no Origin", []formPart{{field: "file", filename: "c.txt", data: []byte("x")}}, []string{"Sec-Fetch-Site", "same-site"}, 403, ""},
	}
	for _, c := range refused {
		ctype, b := form(t, c.parts...)
		code, out := postForm(t, url, ctype, bytes.NewReader(b), c.headers...)
		if code != c.want || !strings.Contains(out, c.text) {
			t.Errorf("%s: %d %s, want %d %q", c.name, code, out, c.want, c.text)
		}
	}
	// Sent chunked, far over the limit: cut off at it.
	ctype, b = form(t, formPart{field: "file", filename: "huge.bin", data: bytes.Repeat([]byte("z"), 16<<20)})
	if code, out := postForm(t, url, ctype, io.MultiReader(bytes.NewReader(b)), own...); code != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked 16 MiB: %d %s", code, out)
	}
	if code, out := postForm(t, srv.URL+"/api/workspaces/desk/files/upload", "multipart/form-data", strings.NewReader("x"), own...); code != 400 || !strings.Contains(out, "Missing multipart boundary") {
		t.Errorf("no boundary: %d %s", code, out)
	}
	// A form anywhere else is still refused by its type.
	ctype, b = form(t, formPart{field: "path", data: []byte("/made-by-a-form")})
	if code, _ := postForm(t, srv.URL+"/api/workspaces/desk/files/mkdir", ctype, bytes.NewReader(b), own...); code != http.StatusUnsupportedMediaType {
		t.Errorf("a form to mkdir: %d, want 415", code)
	}

	var got []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			got = append(got, rel)
		}
		return nil
	})
	if want := "a.txt b.txt big/limit.bin inbox/report.bin"; strings.Join(got, " ") != want {
		t.Errorf("workspace files = %v, want %s", got, want)
	}
	for _, d := range []string{srv.DataDir, filepath.Join(srv.DataDir, "workspaces")} {
		if _, err := os.Stat(filepath.Join(d, "escape.txt")); err == nil {
			t.Errorf("escape.txt written in %s", d)
		}
	}
	if spilled, _ := os.ReadDir(tmp); len(spilled) != 0 {
		t.Errorf("the server left temporary files: %v", spilled)
	}
}
