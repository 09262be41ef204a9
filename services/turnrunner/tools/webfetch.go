package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/waggle-os/core/libs/netguard"
)

// web_fetch limits.
const (
	// DefaultWebFetchTimeout bounds one fetch, redirects and body included.
	DefaultWebFetchTimeout = 20 * time.Second
	// DefaultWebFetchMaxBytes is the most of a response body web_fetch reads.
	DefaultWebFetchMaxBytes = 2 << 20
	// defaultWebFetchChars is the most characters of text returned when the
	// model asks for no other limit; maxWebFetchChars caps what it may ask.
	defaultWebFetchChars = 20_000
	maxWebFetchChars     = 200_000
	// maxRedirects is how many redirects one fetch follows.
	maxRedirects = 5
	// lookupTimeout bounds resolving a URL's host before the approval.
	lookupTimeout = 10 * time.Second
)

// errPrivateRefused is a fetch of a private address on a runner that
// fetches public addresses only (a team server without
// --web-fetch-allow-private).
var errPrivateRefused = errors.New("this server does not fetch loopback, link-local, private or metadata addresses")

type webFetchTool struct{ cfg Config }

func (webFetchTool) Name() string { return "web_fetch" }

func (webFetchTool) Description() string {
	return "Fetch a web page over http or https and return its readable text: HTML is reduced to its text " +
		"(scripts, styles and navigation removed, links kept as \"text (url)\"); JSON and plain text are returned " +
		"as they are. Other content (images, PDFs, binaries) is refused. Long pages are cut at maxChars characters."
}

func (webFetchTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"url":{"type":"string","description":"The http:// or https:// URL to fetch"},` +
		`"maxChars":{"type":"integer","minimum":1,"maximum":200000,"description":"Most characters of text to return (default 20000)"}` +
		`},"required":["url"]}`)
}

// webFetchInput is web_fetch's arguments as the model gives them.
type webFetchInput struct {
	URL      string  `json:"url"`
	MaxChars *intArg `json:"maxChars,omitempty"`
}

func (in *webFetchInput) validate() error {
	u, err := parseFetchURL(in.URL)
	if err != nil {
		return err
	}
	in.URL = u.String()
	if in.MaxChars != nil && (*in.MaxChars < 1 || *in.MaxChars > maxWebFetchChars) {
		return fmt.Errorf("maxChars must be between 1 and %d", maxWebFetchChars)
	}
	return nil
}

// parseFetchURL accepts an absolute http or https URL with a host.
func parseFetchURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, errors.New("url is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("url is not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("url must start with http:// or https://")
	}
	if u.Hostname() == "" {
		return nil, errors.New("url has no host")
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// webFetchCall is the canonical input of a web_fetch call: the model's
// arguments plus what the runner found when it resolved the host. The
// underscored fields are the runner's (the model cannot set them: decode
// refuses unknown keys); the approval rules ask for a human when _private
// is set, and the approval card shows the addresses the fetch will dial.
type webFetchCall struct {
	URL      string `json:"url"`
	MaxChars int    `json:"maxChars,omitempty"`
	// Private says the host resolved to an address that is not public.
	Private bool `json:"_private,omitempty"`
	// Addresses are the host's resolved addresses, shown when Private: the
	// fetch dials these and no others for this host (no second lookup, so
	// a DNS answer that changes after the approval changes nothing).
	Addresses []string `json:"_addresses,omitempty"`
}

// Decode decodes the arguments strictly, then resolves the URL's host once:
// the addresses found are pinned for the fetch, and whether one of them is
// not public decides (through _private) whether approval is asked — or,
// where private addresses are not fetched at all, refuses the call now.
func (t webFetchTool) Decode(input json.RawMessage) (Call, error) {
	in := new(webFetchInput)
	if err := decode(input, in); err != nil {
		return Call{}, err
	}
	if err := in.validate(); err != nil {
		return Call{}, err
	}
	u, _ := url.Parse(in.URL) // validate parsed it
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	addrs, err := t.resolve(ctx, u.Hostname())
	if err != nil {
		return Call{}, err
	}
	c := webFetchCall{URL: in.URL}
	if in.MaxChars != nil {
		c.MaxChars = int(*in.MaxChars)
	}
	approved := map[netip.Addr]bool{}
	for _, a := range addrs {
		if !t.isPublic(a) {
			c.Private = true
			approved[a] = true
		}
	}
	if c.Private {
		if !t.cfg.WebFetchAllowPrivate {
			return Call{}, fmt.Errorf("%s: %w", u.Hostname(), errPrivateRefused)
		}
		for _, a := range addrs {
			c.Addresses = append(c.Addresses, a.String())
		}
	}
	canonical, err := json.Marshal(c)
	if err != nil {
		return Call{}, err
	}
	f := &fetcher{tool: t, pins: map[string][]netip.Addr{pinKey(u.Hostname()): addrs}, approved: approved}
	return Call{Input: canonical, run: func(ctx context.Context, _ Env) (string, error) {
		return f.fetch(ctx, u, c.MaxChars)
	}}, nil
}

// isPublic is cfg's test hook or netguard.IsPublic.
func (t webFetchTool) isPublic(a netip.Addr) bool {
	if t.cfg.webFetchIsPublic != nil {
		return t.cfg.webFetchIsPublic(a)
	}
	return netguard.IsPublic(a)
}

// resolve looks host up once (an IP literal is its own answer).
func (t webFetchTool) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	lookup := t.cfg.webFetchLookup
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	addrs, err := lookup(ctx, host)
	if err != nil || len(addrs) == 0 {
		return nil, fmt.Errorf("could not resolve the host %s", host)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.Unmap())
	}
	return out, nil
}

// pinKey is the form of a host name pins are kept under: the transport
// dials a URL's host in its IDNA ASCII form, which a redirect's
// req.URL.Hostname() need not be in.
func pinKey(host string) string {
	if a, err := idna.Lookup.ToASCII(host); err == nil {
		host = a
	}
	return strings.ToLower(host)
}

// fetcher is one call's fetch: the hosts it has resolved, each pinned to
// its addresses, and the private addresses the approval covered.
type fetcher struct {
	tool     webFetchTool
	mu       sync.Mutex
	pins     map[string][]netip.Addr
	approved map[netip.Addr]bool
}

// allowed says whether a connection to a may be made: a public address,
// or a private one the call was approved for.
func (f *fetcher) allowed(a netip.Addr) bool {
	return f.tool.isPublic(a) || f.approved[a]
}

// pin resolves a redirect's host (once per host) and refuses it when an
// address is neither public nor approved.
func (f *fetcher) pin(ctx context.Context, host string) error {
	f.mu.Lock()
	_, ok := f.pins[pinKey(host)]
	f.mu.Unlock()
	if ok {
		return nil
	}
	addrs, err := f.tool.resolve(ctx, host)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if !f.allowed(a) {
			return fmt.Errorf("redirected to %s, a loopback, link-local, private or metadata address; "+
				"fetch that URL directly if it is meant (it may need an approval)", host)
		}
	}
	f.mu.Lock()
	f.pins[pinKey(host)] = addrs
	f.mu.Unlock()
	return nil
}

// dial connects to one of host's pinned addresses; a host not pinned is
// never looked up here. The Control hook checks the address actually
// dialled, a last net under the checks above.
func (f *fetcher) dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	addrs := f.pins[pinKey(host)]
	f.mu.Unlock()
	if len(addrs) == 0 {
		return nil, fmt.Errorf("web_fetch: %s was not resolved before the dial", host)
	}
	d := &net.Dialer{Timeout: 10 * time.Second, Control: netguard.Control(f.allowed)}
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// client is the call's HTTP client: dials through dial only, no proxy (a
// proxy would connect for it, unchecked), at most maxRedirects redirects,
// each to http or https and pinned first.
func (f *fetcher) client() *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           f.dial,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: f.tool.cfg.WebFetchTimeout,
		MaxIdleConns:          1,
		DisableKeepAlives:     true,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   f.tool.cfg.WebFetchTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirected to a %s: URL; only http and https are fetched", req.URL.Scheme)
			}
			return f.pin(req.Context(), req.URL.Hostname())
		},
	}
}

// fetch GETs u and returns its readable text, cut at maxChars characters.
func (f *fetcher) fetch(ctx context.Context, u *url.URL, maxChars int) (string, error) {
	if maxChars <= 0 {
		maxChars = defaultWebFetchChars
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", errors.New("could not build the request")
	}
	req.Header.Set("User-Agent", "Waggle/1 (web_fetch)")
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/json,text/plain;q=0.9,*/*;q=0.1")
	client := f.client()
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return "", fetchError(ctx, u, err, f.tool.cfg.WebFetchTimeout)
	}
	defer resp.Body.Close()
	final := resp.Request.URL
	if resp.StatusCode >= 400 {
		return "", fmt.Errorf("%s answered %s", final.Redacted(), resp.Status)
	}
	limit := f.tool.cfg.WebFetchMaxBytes
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil && len(body) == 0 {
		return "", fetchError(ctx, u, err, f.tool.cfg.WebFetchTimeout)
	}
	cut := int64(len(body)) > limit
	if cut {
		body = body[:limit]
	}
	kind, err := contentKind(resp.Header.Get("Content-Type"), body)
	if err != nil {
		return "", err
	}
	var text string
	if kind == kindHTML {
		text = htmlText(body, final)
	} else {
		text = strings.ToValidUTF8(string(body), "\uFFFD")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\n", final.Redacted())
	if cut {
		fmt.Fprintf(&b, "[the page is larger than %d bytes: only its start was read]\n", limit)
	}
	b.WriteString("\n")
	b.WriteString(cutChars(text, maxChars))
	return b.String(), nil
}

// fetchError is a failed request as the model reads it: what went wrong,
// with no Go error chain (the dial details are logged).
func fetchError(ctx context.Context, u *url.URL, err error, timeout time.Duration) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, netguard.ErrPrivateAddress):
		return fmt.Errorf("could not fetch %s: %w", u.Redacted(), errPrivateRefused)
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return fmt.Errorf("could not fetch %s: no complete answer within %s", u.Redacted(), timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		// CheckRedirect's own errors read well as they are.
		var ne net.Error
		if !errors.As(ue.Err, &ne) {
			slog.Debug("web_fetch", "url", u.Redacted(), "err", err)
			return fmt.Errorf("could not fetch %s: %v", u.Redacted(), ue.Err)
		}
	}
	slog.Info("web_fetch failed", "url", u.Redacted(), "err", err)
	return fmt.Errorf("could not fetch %s: the server could not be reached", u.Redacted())
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Content kinds web_fetch returns.
const (
	kindHTML = iota
	kindText
)

// contentKind classifies a response by its Content-Type (sniffed when
// absent): HTML is reduced to text; text/*, JSON and XML are returned as
// they are; anything else is refused.
func contentKind(header string, body []byte) (int, error) {
	if strings.TrimSpace(header) == "" {
		header = http.DetectContentType(body)
	}
	mt, _, err := mime.ParseMediaType(header)
	if err != nil {
		return 0, fmt.Errorf("the page has an unreadable content type %q", truncateUTF8(header, 60))
	}
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		return kindHTML, nil
	case strings.HasPrefix(mt, "text/"), mt == "application/json", strings.HasSuffix(mt, "+json"),
		mt == "application/xml", strings.HasSuffix(mt, "+xml"), mt == "application/javascript":
		return kindText, nil
	}
	return 0, fmt.Errorf("the page is %s, not text: web_fetch reads HTML, JSON and text only", mt)
}

// cutChars keeps the first n characters of s, saying so when it cut.
func cutChars(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := range s {
		if i == n {
			total := utf8.RuneCountInString(s)
			return s[:k] + fmt.Sprintf("\n\n[cut at %d of %d characters; ask with a larger maxChars for more]", n, total)
		}
		i++
	}
	return s
}
