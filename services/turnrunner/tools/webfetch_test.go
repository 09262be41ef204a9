package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

var loopback4 = netip.MustParseAddr("127.0.0.1")

// publicLoopbackConfig is a desktop config in which 127.0.0.1 plays a public
// address (every other address stays private), so httptest servers can
// stand for sites on the internet.
func publicLoopbackConfig() Config {
	cfg := DefaultConfig()
	cfg.webFetchIsPublic = func(a netip.Addr) bool { return a == loopback4 }
	return cfg
}

// fetchCall decodes web_fetch arguments with cfg.
func fetchCall(t *testing.T, cfg Config, input any) (Call, error) {
	t.Helper()
	raw, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := NewRegistry(cfg).Get("web_fetch")
	return tool.Decode(raw)
}

func fetch(t *testing.T, cfg Config, input any) (string, error) {
	t.Helper()
	c, err := fetchCall(t, cfg, input)
	if err != nil {
		return "", err
	}
	return c.Run(context.Background(), newEnv(t))
}

func serve(t *testing.T, contentType, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestWebFetchText: HTML is reduced to its readable text with links kept;
// JSON and plain text come back as they are.
func TestWebFetchText(t *testing.T) {
	page := `<!doctype html><html><head><title> The  Page </title><style>body{color:red}</style>
<script>var secret = "script text";</script></head><body>
<nav><a href="/home">Home</a> <a href="/about">About</a></nav>
<h1>Welcome</h1>
<p>Read the <a href="/docs/guide">guide</a> and   the <a href="https://example.org/x">https://example.org/x</a>.</p>
<ul><li>one</li><li>two</li></ul>
<noscript>enable js</noscript>
<pre>  a
  b</pre>
</body></html>`
	for _, tc := range []struct {
		name, ctype, body string
		want, notWant     []string
	}{
		{name: "html", ctype: "text/html; charset=utf-8", body: page,
			want: []string{"Title: The Page", "# Welcome", "Read the guide (BASE/docs/guide) and the https://example.org/x .",
				"- one\n- two", "  a\n  b"},
			notWant: []string{"secret", "color:red", "Home", "About", "enable js"}},
		{name: "json", ctype: "application/json", body: `{"a": [1, 2], "b": "<p>x</p>"}`,
			want: []string{`{"a": [1, 2], "b": "<p>x</p>"}`}},
		{name: "text", ctype: "text/plain", body: "line 1\n  line 2\n",
			want: []string{"line 1\n  line 2"}},
		{name: "sniffed html", ctype: "", body: "<html><body><p>sniffed</p></body></html>", want: []string{"sniffed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, tc.ctype, tc.body)
			out, err := fetch(t, publicLoopbackConfig(), map[string]any{"url": srv.URL + "/page"})
			if err != nil {
				t.Fatalf("fetch: %v", err)
			}
			if !strings.HasPrefix(out, "URL: "+srv.URL+"/page\n") {
				t.Errorf("output does not start with the URL:\n%s", out)
			}
			for _, w := range tc.want {
				if w = strings.ReplaceAll(w, "BASE", srv.URL); !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestWebFetchNonTextRefused: an image is a clear error, not bytes.
func TestWebFetchNonTextRefused(t *testing.T) {
	srv := serve(t, "image/png", "\x89PNG\r\n\x1a\n....")
	_, err := fetch(t, publicLoopbackConfig(), map[string]any{"url": srv.URL})
	if err == nil || !strings.Contains(err.Error(), "image/png, not text") {
		t.Fatalf("err = %v, want a not-text error", err)
	}
}

// TestWebFetchSizeCut: only WebFetchMaxBytes of the body are read, and the
// text is cut at maxChars with a note.
func TestWebFetchSizeCut(t *testing.T) {
	srv := serve(t, "text/plain", strings.Repeat("x", 5000))
	cfg := publicLoopbackConfig()
	cfg.WebFetchMaxBytes = 1000
	out, err := fetch(t, cfg, map[string]any{"url": srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "larger than 1000 bytes") || strings.Count(out, "x") != 1000 {
		t.Errorf("body not cut at 1000 bytes: %d x's\n%.200s", strings.Count(out, "x"), out)
	}
	out, err = fetch(t, publicLoopbackConfig(), map[string]any{"url": srv.URL, "maxChars": 10})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "\n"+strings.Repeat("x", 10)+"\n") || !strings.Contains(out, "[cut at 10 of 5000 characters") {
		t.Errorf("text not cut at 10 characters:\n%s", out)
	}
}

// redirector redirects /r/N to /r/N-1 and serves /r/0.
func redirector(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscanf(r.URL.Path, "/r/%d", &n)
		if n > 0 {
			http.Redirect(w, r, fmt.Sprintf("/r/%d", n-1), http.StatusFound)
			return
		}
		fmt.Fprint(w, "arrived")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestWebFetchRedirectLimit: five redirects are followed, a sixth is not.
func TestWebFetchRedirectLimit(t *testing.T) {
	srv := redirector(t)
	out, err := fetch(t, publicLoopbackConfig(), map[string]any{"url": srv.URL + "/r/5"})
	if err != nil || !strings.Contains(out, "arrived") || !strings.Contains(out, "URL: "+srv.URL+"/r/0") {
		t.Fatalf("5 redirects: %q, %v", out, err)
	}
	_, err = fetch(t, publicLoopbackConfig(), map[string]any{"url": srv.URL + "/r/6"})
	if err == nil || !strings.Contains(err.Error(), "stopped after 5 redirects") {
		t.Fatalf("6 redirects: err = %v", err)
	}
}

// privateServer listens on 127.0.0.2, an address publicLoopbackConfig
// keeps private, and counts its requests.
func privateServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2: %v", err)
	}
	var hits atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "internal secret")
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestWebFetchRedirectToPrivateRefused: a public page that redirects to a
// private address does not get the runner to fetch it, even on a desktop
// (the approval, had one been asked, covered the public address only).
func TestWebFetchRedirectToPrivateRefused(t *testing.T) {
	priv, hits := privateServer(t)
	pub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, priv.URL+"/admin", http.StatusFound)
	}))
	t.Cleanup(pub.Close)
	c, err := fetchCall(t, publicLoopbackConfig(), map[string]any{"url": pub.URL})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(c.Input), "_private") {
		t.Fatalf("public URL marked private: %s", c.Input)
	}
	out, err := c.Run(context.Background(), newEnv(t))
	if err == nil || !strings.Contains(err.Error(), "redirected to 127.0.0.2") {
		t.Fatalf("redirect to a private address: %q, %v", out, err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the private server was reached %d times", n)
	}
}

// TestWebFetchPrivateAddress: a URL whose host is not public is marked
// _private (with its addresses) for the approval rules on a desktop, and
// refused before any connection where private addresses are not fetched.
func TestWebFetchPrivateAddress(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "local page")
	}))
	t.Cleanup(srv.Close)

	c, err := fetchCall(t, DefaultConfig(), map[string]any{"url": srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var got webFetchCall
	if err := json.Unmarshal(c.Input, &got); err != nil || !got.Private || len(got.Addresses) != 1 || got.Addresses[0] != "127.0.0.1" {
		t.Fatalf("canonical input %s: want _private with 127.0.0.1", c.Input)
	}
	if out, err := c.Run(context.Background(), newEnv(t)); err != nil || !strings.Contains(out, "local page") {
		t.Fatalf("approved private fetch: %q, %v", out, err)
	}

	team := DefaultConfig()
	team.WebFetchAllowPrivate = false
	before := hits.Load()
	for _, u := range []string{srv.URL, "http://169.254.169.254/latest/meta-data/", "http://[::1]:1/", "http://10.0.0.1/"} {
		if _, err := fetchCall(t, team, map[string]any{"url": u}); !errors.Is(err, errPrivateRefused) {
			t.Errorf("%s on a team server: err = %v, want refused", u, err)
		}
	}
	if hits.Load() != before {
		t.Fatal("the refused URL was fetched")
	}
}

// TestWebFetchDNSPinned: the host is resolved once, before the approval;
// a DNS answer that changes afterwards (rebinding to a private address)
// is never asked for, and the fetch goes to the address first found.
func TestWebFetchDNSPinned(t *testing.T) {
	srv := serve(t, "text/plain", "public content")
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var lookups atomic.Int32
	cfg := publicLoopbackConfig()
	cfg.webFetchLookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		if lookups.Add(1) == 1 {
			return []netip.Addr{loopback4}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
	}
	out, err := fetch(t, cfg, map[string]any{"url": "http://rebind.test:" + port + "/"})
	if err != nil || !strings.Contains(out, "public content") {
		t.Fatalf("fetch: %q, %v", out, err)
	}
	if n := lookups.Load(); n != 1 {
		t.Fatalf("host looked up %d times, want once", n)
	}
}

// TestWebFetchArguments: arguments are decoded strictly; the model cannot
// set the runner's fields nor fetch anything but http(s).
func TestWebFetchArguments(t *testing.T) {
	for _, in := range []any{
		map[string]any{"url": "ftp://example.org/"},
		map[string]any{"url": "file:///etc/passwd"},
		map[string]any{"url": "/relative"},
		map[string]any{"url": ""},
		map[string]any{"url": "http://127.0.0.1/", "_private": false},
		map[string]any{"url": "http://127.0.0.1/", "_addresses": []string{"93.184.216.34"}},
		map[string]any{"url": "http://127.0.0.1/", "maxChars": 0},
		map[string]any{"url": "http://127.0.0.1/", "URL": "http://example.org/"},
	} {
		if _, err := fetchCall(t, DefaultConfig(), in); err == nil {
			t.Errorf("%v accepted", in)
		}
	}
}

// TestWebFetchApprovedPrivateRedirect: an approved private fetch may follow
// redirects within the address it was approved for.
func TestWebFetchApprovedPrivateRedirect(t *testing.T) {
	srv := redirector(t)
	out, err := fetch(t, DefaultConfig(), map[string]any{"url": srv.URL + "/r/2"})
	if err != nil || !strings.Contains(out, "arrived") {
		t.Fatalf("redirect within the approved address: %q, %v", out, err)
	}
}
