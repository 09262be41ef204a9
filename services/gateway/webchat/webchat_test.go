package webchat

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

var notFound = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"error":"Not found"}`))
})

func TestServe(t *testing.T) {
	tests := []struct {
		path, ctype, contains string
		status                int
	}{
		{"/", "text/html", `<script type="module" src="/chat/main.js"></script>`, 200},
		{"/chat/", "text/html", `<script type="module" src="/chat/main.js"></script>`, 200},
		{"/chat/index.html", "text/html", `id="messages"`, 200},
		{"/chat/main.js", "text/javascript", "boot();", 200},
		{"/chat/turn.js", "text/javascript", "X-Waggle-Turn-Id", 200},
		{"/chat/markdown.js", "text/javascript", "const Markdown", 200},
		{"/chat/style.css", "text/css", "#messages", 200},
		{"/chat/theme.js", "text/javascript", "waggle.theme", 200},
		{"/chat/syntax.js", "text/javascript", "const Syntax", 200},
		{"/chat/favicon.svg", "image/svg+xml", "<svg", 200},
		{"/chat", "", "", http.StatusMovedPermanently},
		{"/chat/nope.js", "application/json", "Not found", 404},
		{"/chat/app.js", "application/json", "Not found", 404},
		{"/chat/static/main.js", "application/json", "Not found", 404},
		{"/chat/../chat/main.js", "application/json", "Not found", 404},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		Serve(rec, httptest.NewRequest(http.MethodGet, tt.path, nil), notFound)
		if rec.Code != tt.status || !strings.HasPrefix(rec.Header().Get("Content-Type"), tt.ctype) || !strings.Contains(rec.Body.String(), tt.contains) {
			t.Errorf("GET %s: %d %q %.80q", tt.path, rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
		}
	}
}

func TestOwns(t *testing.T) {
	tests := []struct {
		path   string
		atRoot bool
		want   bool
	}{
		{"/", true, true}, {"/", false, false}, {"/chat", false, true}, {"/chat/", false, true},
		{"/chat/app.js", true, true}, {"/chatter", true, false}, {"/api/chat", true, false}, {"/health", true, false},
	}
	for _, tt := range tests {
		if got := Owns(tt.path, tt.atRoot); got != tt.want {
			t.Errorf("Owns(%q, %v) = %v", tt.path, tt.atRoot, got)
		}
	}
}

// TestNoHTMLSinks: the page never turns strings into markup or code. Text
// from the model, tools or the server only reaches the DOM as text (the
// browser test proves the behaviour; this keeps the sinks out).
func TestNoHTMLSinks(t *testing.T) {
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\s*'on|\.srcdoc`)
	for name, data := range files {
		if !strings.HasSuffix(name, ".js") {
			continue
		}
		if m := sinks.FindString(string(data)); m != "" {
			t.Errorf("%s uses %s", name, m)
		}
	}
	// The CSP (script-src 'self') forbids inline scripts and handlers anyway.
	index := string(files["index.html"])
	if regexp.MustCompile(`<script>|<script [^>]*>[^<]`).MatchString(index) || regexp.MustCompile(`\son[a-z]+=`).MatchString(index) {
		t.Error("index.html has an inline script or event handler")
	}
}

// TestModules: the page is ES modules by job, each small enough to read
// whole, and every module one imports is served (a missing one would stop
// the page with nothing on screen but the HTML).
func TestModules(t *testing.T) {
	imports := regexp.MustCompile(`(?m)^import \{[^}]*\} from '\./([a-z]+\.js)';$`)
	seen := 0
	for name, data := range files {
		if !strings.HasSuffix(name, ".js") {
			continue
		}
		if n := strings.Count(string(data), "\n"); n > 600 {
			t.Errorf("%s has %d lines; split it by job", name, n)
		}
		for _, m := range imports.FindAllStringSubmatch(string(data), -1) {
			seen++
			if _, ok := files[m[1]]; !ok {
				t.Errorf("%s imports %s, which is not served", name, m[1])
			}
		}
	}
	if seen == 0 {
		t.Error("no module imports found: the check above checked nothing")
	}
	if !strings.Contains(string(files["index.html"]), `<script type="module" src="/chat/main.js">`) {
		t.Error("index.html does not load main.js as a module")
	}
}
