package security

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

// The edge's attacks: a web page on another origin posting to the local
// server (CSRF through no-cors fetch, sendBeacon or a form), bodies that
// slip past the JSON rule, stalled bodies, the bearer token handed out by
// /health, and health checkers that send no Host.

const edgeEvilOrigin = "http://evil.example"

// edgeReply is a response read to the end: status, error body and headers.
type edgeReply struct {
	Status int
	Error  string `json:"error"`
	Code   string `json:"code"`
	Header http.Header
	Body   string
}

// edgeSend sends a request with body sent as is and exactly the given
// header pairs: no Content-Type unless one is given, as a browser's
// no-cors fetch of a Blob or navigator.sendBeacon sends it.
func edgeSend(t *testing.T, method, url string, body []byte, headers ...string) edgeReply {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	rep := edgeReply{Status: resp.StatusCode, Header: resp.Header, Body: string(data)}
	_ = json.Unmarshal(data, &rep)
	return rep
}

// edgeGetJSON GETs path (with header pairs) and decodes the 200 answer.
func edgeGetJSON(t *testing.T, url string, out any, headers ...string) {
	t.Helper()
	rep := edgeSend(t, http.MethodGet, url, nil, headers...)
	if rep.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, rep.Status, rep.Body)
	}
	if err := json.Unmarshal([]byte(rep.Body), out); err != nil {
		t.Fatalf("GET %s: %q: %v", url, rep.Body, err)
	}
}

func edgeRefusedOrigin(t *testing.T, rep edgeReply) {
	t.Helper()
	if rep.Status != http.StatusForbidden || rep.Code != "ORIGIN_NOT_ALLOWED" || rep.Error != "Cross-origin request refused" {
		t.Fatalf("cross-origin request: %d %s, want 403 ORIGIN_NOT_ALLOWED", rep.Status, rep.Body)
	}
}

func edgeUnsupportedMedia(t *testing.T, rep edgeReply) {
	t.Helper()
	if rep.Status != http.StatusUnsupportedMediaType || rep.Code != "FST_ERR_CTP_INVALID_MEDIA_TYPE" {
		t.Fatalf("non-JSON body: %d %s, want 415 FST_ERR_CTP_INVALID_MEDIA_TYPE", rep.Status, rep.Body)
	}
}

// edgeWorkspaceIDs lists the workspaces' ids.
func edgeWorkspaceIDs(t *testing.T, p *waggletest.Proc) []string {
	t.Helper()
	var list []struct{ ID string }
	edgeGetJSON(t, p.URL+"/api/workspaces", &list)
	ids := make([]string, 0, len(list))
	for _, w := range list {
		ids = append(ids, w.ID)
	}
	return ids
}

func edgeHasWorkspace(t *testing.T, p *waggletest.Proc, name string) bool {
	t.Helper()
	for _, id := range edgeWorkspaceIDs(t, p) {
		if strings.Contains(strings.ToLower(id), strings.ToLower(name)) {
			return true
		}
	}
	return false
}

// edgeFrames is the number of memory frames of the default workspace.
func edgeFrames(t *testing.T, p *waggletest.Proc) int {
	t.Helper()
	var r struct{ Count int }
	edgeGetJSON(t, p.URL+"/api/memory/frames?workspace=default", &r)
	return r.Count
}

// edgeSessions is the number of sessions of the default workspace.
func edgeSessions(t *testing.T, p *waggletest.Proc) int {
	t.Helper()
	var raw json.RawMessage
	edgeGetJSON(t, p.URL+"/api/workspaces/default/sessions", &raw)
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		return len(list)
	}
	var wrapped struct{ Sessions []json.RawMessage }
	if err := json.Unmarshal(raw, &wrapped); err != nil {
		t.Fatalf("sessions: %s: %v", raw, err)
	}
	return len(wrapped.Sessions)
}

// edgeGrantDir is a data dir holding one grant (bash on *).
func edgeGrantDir(t *testing.T) string {
	dir := t.TempDir()
	grants := `{"version":1,"grants":[{"id":"g1","toolName":"bash","targetKey":"*","sourceWorkspaceId":null,` +
		`"description":"Execute bash on *","grantedAt":"2026-01-01T00:00:00.000Z","expiresAt":null}]}`
	if err := os.WriteFile(filepath.Join(dir, "approval-grants.json"), []byte(grants), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func edgeGrants(t *testing.T, p *waggletest.Proc) int {
	t.Helper()
	var g struct{ Grants []json.RawMessage }
	edgeGetJSON(t, p.URL+"/api/approval/grants", &g)
	return len(g.Grants)
}

func TestEdgeForeignOriginChatRefused(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin)
	body := []byte(`{"message":"exfiltrate","workspace":"default","session":"csrf-chat"}`)
	// no-cors fetch with a Blob body: no Content-Type at all.
	edgeRefusedOrigin(t, edgeSend(t, http.MethodPost, p.URL+"/api/chat", body, "Origin", edgeEvilOrigin))
	// and with the JSON type a CORS-unaware attacker might still try.
	edgeRefusedOrigin(t, edgeSend(t, http.MethodPost, p.URL+"/api/chat", body, "Origin", edgeEvilOrigin, "Content-Type", "application/json"))
	if n := edgeSessions(t, p); n != 0 {
		t.Fatalf("a refused chat left %d session(s)", n)
	}
}

func TestEdgeForeignOriginMemoryFrameRefused(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin)
	body := []byte(`{"content":"the attacker's planted memory","workspace":"default"}`)
	edgeRefusedOrigin(t, edgeSend(t, http.MethodPost, p.URL+"/api/memory/frames", body, "Origin", edgeEvilOrigin))
	if n := edgeFrames(t, p); n != 0 {
		t.Fatalf("a refused frame was stored (%d frames)", n)
	}
}

func TestEdgeForeignOriginWorkspaceRefused(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin)
	body := []byte(`{"name":"csrfworkspace"}`)
	edgeRefusedOrigin(t, edgeSend(t, http.MethodPost, p.URL+"/api/workspaces", body, "Origin", edgeEvilOrigin))
	if edgeHasWorkspace(t, p, "csrfworkspace") {
		t.Fatal("a refused request created a workspace")
	}
}

func TestEdgeForeignOriginCommandRefused(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin)
	body := []byte(`{"command":"/help"}`)
	edgeRefusedOrigin(t, edgeSend(t, http.MethodPost, p.URL+"/api/commands/execute", body, "Origin", edgeEvilOrigin))
}

func TestEdgeForeignOriginGrantsClearRefused(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcDataDir(edgeGrantDir(t)))
	if n := edgeGrants(t, p); n != 1 {
		t.Fatalf("planted grant not loaded: %d grants", n)
	}
	// An empty POST: what a form or sendBeacon with no body sends.
	edgeRefusedOrigin(t, edgeSend(t, http.MethodPost, p.URL+"/api/approval/grants/clear", nil, "Origin", edgeEvilOrigin))
	edgeRefusedOrigin(t, edgeSend(t, http.MethodPost, p.URL+"/api/approval/grants/clear", []byte{}, "Origin", edgeEvilOrigin,
		"Content-Type", "text/plain"))
	if n := edgeGrants(t, p); n != 1 {
		t.Fatalf("a refused clear removed the grants: %d left", n)
	}
}

func TestEdgeNullOriginRefused(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin)
	// A sandboxed iframe or a data: URL page sends Origin: null.
	edgeRefusedOrigin(t, edgeSend(t, http.MethodPost, p.URL+"/api/workspaces", []byte(`{"name":"nullorigin"}`),
		"Origin", "null", "Content-Type", "application/json"))
	if edgeHasWorkspace(t, p, "nullorigin") {
		t.Fatal("an Origin: null request created a workspace")
	}
}

func TestEdgeCrossSiteFetchRefused(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin)
	edgeRefusedOrigin(t, edgeSend(t, http.MethodPost, p.URL+"/api/workspaces", []byte(`{"name":"crosssite"}`),
		"Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"))
	if edgeHasWorkspace(t, p, "crosssite") {
		t.Fatal("a cross-site request created a workspace")
	}
}

func TestEdgeBodyWithoutContentTypeRefused(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin)
	// No Origin: even a script's request must say what its body is.
	edgeUnsupportedMedia(t, edgeSend(t, http.MethodPost, p.URL+"/api/memory/frames",
		[]byte(`{"content":"untyped memory","workspace":"default"}`)))
	edgeUnsupportedMedia(t, edgeSend(t, http.MethodPost, p.URL+"/api/workspaces", []byte(`{"name":"untyped"}`)))
	if n := edgeFrames(t, p); n != 0 {
		t.Fatalf("an untyped body was stored (%d frames)", n)
	}
	if edgeHasWorkspace(t, p, "untyped") {
		t.Fatal("an untyped body created a workspace")
	}
}

func TestEdgeEmptyTextPlainBodyRefused(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcDataDir(edgeGrantDir(t)))
	edgeUnsupportedMedia(t, edgeSend(t, http.MethodPost, p.URL+"/api/approval/grants/clear", []byte{}, "Content-Type", "text/plain"))
	if n := edgeGrants(t, p); n != 1 {
		t.Fatalf("a text/plain clear removed the grants: %d left", n)
	}
}

func TestEdgeNoBodyNoContentTypeAccepted(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcDataDir(edgeGrantDir(t)))
	// curl -X POST …/grants/clear: no body, no type, no Origin.
	if rep := edgeSend(t, http.MethodPost, p.URL+"/api/approval/grants/clear", nil); rep.Status != http.StatusOK {
		t.Fatalf("bodiless POST: %d %s", rep.Status, rep.Body)
	}
	if n := edgeGrants(t, p); n != 0 {
		t.Fatalf("clear left %d grants", n)
	}
	// An empty body with the JSON type is {} (DESIGN §9).
	if rep := edgeSend(t, http.MethodPost, p.URL+"/api/approval/grants/clear", []byte{}, "Content-Type", "application/json"); rep.Status != http.StatusOK {
		t.Fatalf("empty JSON POST: %d %s", rep.Status, rep.Body)
	}
}

func TestEdgeLegitimateOriginsAccepted(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin)
	// No Origin: curl, scripts, waggle chat. The server's own: the
	// embedded web chat and --frontend-dir's app. Then the desktop app's
	// webviews and its development server.
	for i, origin := range []string{
		"", p.URL,
		"tauri://localhost", "http://tauri.localhost", "https://tauri.localhost",
		"http://localhost:1420", "http://127.0.0.1:1420",
	} {
		name := fmt.Sprintf("legit%d", i)
		headers := []string{"Content-Type", "application/json"}
		if origin != "" {
			headers = append(headers, "Origin", origin)
		}
		if origin != "" && origin != p.URL {
			// The desktop webview calls another site.
			headers = append(headers, "Sec-Fetch-Site", "cross-site")
		}
		rep := edgeSend(t, http.MethodPost, p.URL+"/api/workspaces", []byte(`{"name":"`+name+`"}`), headers...)
		if rep.Status/100 != 2 {
			t.Errorf("Origin %q: %d %s", origin, rep.Status, rep.Body)
			continue
		}
		if origin != "" && rep.Header.Get("Access-Control-Allow-Origin") != origin && origin != p.URL {
			t.Errorf("Origin %q: Access-Control-Allow-Origin %q", origin, rep.Header.Get("Access-Control-Allow-Origin"))
		}
		if !edgeHasWorkspace(t, p, name) {
			t.Errorf("Origin %q: workspace not created", origin)
		}
	}
	// A chat from the server's own origin streams.
	rep := edgeSend(t, http.MethodPost, p.URL+"/api/chat", []byte(`{"message":"hi"}`), "Origin", p.URL, "Content-Type", "application/json",
		"Sec-Fetch-Site", "same-origin")
	if rep.Status != http.StatusOK || !strings.Contains(rep.Body, "event: done") {
		t.Fatalf("same-origin chat: %d %s", rep.Status, rep.Body)
	}
}

func TestEdgeDevOriginRefusedByDefault(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin)
	edgeRefusedOrigin(t, edgeSend(t, http.MethodPost, p.URL+"/api/workspaces", []byte(`{"name":"devport"}`),
		"Origin", "http://localhost:5173", "Content-Type", "application/json"))
	if edgeHasWorkspace(t, p, "devport") {
		t.Fatal("a dev-port origin created a workspace")
	}
}

func TestEdgeDevOriginAllowedWithOptIn(t *testing.T) {
	for _, opt := range []waggletest.ProcOption{
		waggletest.ProcArgs("--allow-dev-origins"),
		waggletest.ProcEnv("WAGGLE_ALLOW_DEV_ORIGINS=true"),
	} {
		p := waggletest.StartProc(t, waggleBin, opt)
		rep := edgeSend(t, http.MethodPost, p.URL+"/api/workspaces", []byte(`{"name":"devport"}`),
			"Origin", "http://localhost:5173", "Content-Type", "application/json")
		if rep.Status/100 != 2 || rep.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
			t.Fatalf("dev origin with the opt-in: %d %s %v", rep.Status, rep.Body, rep.Header)
		}
		p.Stop(t)
	}
}

func TestEdgeOperatorOriginAllowed(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcArgs("--allowed-origins", "https://waggle.example.com"))
	rep := edgeSend(t, http.MethodPost, p.URL+"/api/workspaces", []byte(`{"name":"operator"}`),
		"Origin", "https://waggle.example.com", "Content-Type", "application/json")
	if rep.Status/100 != 2 {
		t.Fatalf("operator's origin: %d %s", rep.Status, rep.Body)
	}
	// The desktop app's origins stay allowed beside the operator's.
	rep = edgeSend(t, http.MethodPost, p.URL+"/api/workspaces", []byte(`{"name":"desktop"}`),
		"Origin", "tauri://localhost", "Content-Type", "application/json")
	if rep.Status/100 != 2 {
		t.Fatalf("desktop origin beside --allowed-origins: %d %s", rep.Status, rep.Body)
	}
}

// edgeReadUntilClosed reads conn until the server closes it, failing when
// that takes longer than within.
func edgeReadUntilClosed(t *testing.T, conn net.Conn, within time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	if err := conn.SetReadDeadline(began.Add(within)); err != nil {
		t.Fatal(err)
	}
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server still held the stalled connection after %v", within)
	}
	return time.Since(began)
}

func TestEdgeStalledBodyClosed(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcArgs("--body-read-timeout", "1s"))
	conns := make([]net.Conn, 5)
	for i := range conns {
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// Promise 100 bytes, send 10, then stall.
		fmt.Fprintf(c, "POST /api/workspaces HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":\"", p.Addr)
		conns[i] = c
	}
	for _, c := range conns {
		edgeReadUntilClosed(t, c, 10*time.Second)
	}
	if edgeHasWorkspace(t, p, "stall") {
		t.Fatal("a stalled body created a workspace")
	}
}

func TestEdgeBodyDeadlineKeepsLongStreams(t *testing.T) {
	// The echo stream of a one-word message takes ~30 tokens × 100 ms:
	// three times the body deadline.
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcArgs("--body-read-timeout", "1s", "--echo-delay", "100ms"))
	began := time.Now()
	rep := edgeSend(t, http.MethodPost, p.URL+"/api/chat", []byte(`{"message":"slow"}`), "Content-Type", "application/json")
	if rep.Status != http.StatusOK || !strings.Contains(rep.Body, "event: done") {
		t.Fatalf("stream longer than the body deadline: %d after %v: %s", rep.Status, time.Since(began), rep.Body)
	}
	if d := time.Since(began); d < 1500*time.Millisecond {
		t.Fatalf("the stream took %v: not longer than the body deadline, the test proves nothing", d)
	}
}

// edgeFreePort is a free TCP port.
func edgeFreePort(t *testing.T) string {
	_, port, err := net.SplitHostPort(waggletest.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// edgeLocalIP is a non-loopback IPv4 address of this machine, "" if none.
func edgeLocalIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

func TestEdgeHealthHidesTokenFromNonLoopback(t *testing.T) {
	ip := edgeLocalIP(t)
	if ip == "" {
		// The gateway's unit test TestHealthTokenOnlyForLoopback covers
		// the rule on RemoteAddr.
		t.Skip("no non-loopback address on this machine")
	}
	port := edgeFreePort(t)
	waggletest.StartProc(t, waggleBin, waggletest.ProcAddr("0.0.0.0:"+port))
	var h map[string]any
	edgeGetJSON(t, "http://"+net.JoinHostPort(ip, port)+"/health", &h)
	if _, ok := h["wsToken"]; ok {
		t.Fatalf("/health gave a non-loopback caller the token: %v", h)
	}
	var local map[string]any
	edgeGetJSON(t, "http://127.0.0.1:"+port+"/health", &local)
	if tok, _ := local["wsToken"].(string); tok == "" {
		t.Fatalf("/health gave a loopback caller no token: %v", local)
	}
}

func TestEdgeBeyondLoopbackBindRequiresToken(t *testing.T) {
	port := edgeFreePort(t)
	waggletest.StartProc(t, waggleBin, waggletest.ProcAddr("0.0.0.0:"+port))
	base := "http://127.0.0.1:" + port
	// A loopback caller of a server bound to every interface may be a
	// reverse proxy relaying anyone: it needs the token too.
	if rep := edgeSend(t, http.MethodGet, base+"/api/workspaces", nil); rep.Status != http.StatusUnauthorized || rep.Code != "MISSING_TOKEN" {
		t.Fatalf("no token: %d %s", rep.Status, rep.Body)
	}
	if rep := edgeSend(t, http.MethodPost, base+"/api/workspaces", []byte(`{"name":"notoken"}`), "Content-Type", "application/json"); rep.Status != http.StatusUnauthorized {
		t.Fatalf("no token, POST: %d %s", rep.Status, rep.Body)
	}
	var h struct{ WSToken string }
	edgeGetJSON(t, base+"/health", &h)
	var list []struct{ ID string }
	edgeGetJSON(t, base+"/api/workspaces", &list, "Authorization", "Bearer "+h.WSToken)
	for _, w := range list {
		if strings.Contains(w.ID, "notoken") {
			t.Fatal("a request without the token created a workspace")
		}
	}
}

func TestEdgeNoHostHTTP10Answered(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin)
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// An HTTP/1.0 health checker (haproxy, old monitoring) sends no Host;
	// no browser does, so DNS rebinding is not in play.
	if _, err := io.WriteString(c, "GET /health HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"status":"ok"`) {
		t.Fatalf("HTTP/1.0 /health without Host: %d %s", resp.StatusCode, data)
	}
}
