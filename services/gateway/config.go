package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/flagext"
	"github.com/waggle-os/core/libs/llmprobe"
	"github.com/waggle-os/core/services/gateway/internal/ratelimit"
	"github.com/waggle-os/core/services/gateway/spa"
)

// Defaults of the gateway's flags, each used by RegisterFlags and, where
// the zero value is not a setting of its own, by withDefaults.
const (
	// DefaultAddr is the listen address: loopback, the original's port.
	DefaultAddr = "127.0.0.1:3333"
	// DefaultMaxMessageLength is the longest chat message in UTF-16 code
	// units (the original's limit).
	DefaultMaxMessageLength = 50000
	// DefaultRateWindow is the sliding window of the rate limit.
	DefaultRateWindow = time.Minute
)

// DefaultBodyReadTimeout bounds the read of one request body.
const DefaultBodyReadTimeout = 30 * time.Second

// DesktopOrigins are the browser origins of the Waggle desktop app (its
// Tauri webview on each platform, and its development server), always
// allowed besides the server's own origin. The first is the fallback
// Access-Control-Allow-Origin of event streams (the original's order).
var DesktopOrigins = []string{
	"http://localhost:1420", "http://127.0.0.1:1420", "tauri://localhost", "http://tauri.localhost", "https://tauri.localhost",
}

// DevOrigins are generic development-server origins the original allowed
// by default. Any local program can serve a page there, so they are
// allowed only with --allow-dev-origins.
var DevOrigins = []string{
	"http://localhost:3000", "http://127.0.0.1:3000", "http://localhost:3333", "http://127.0.0.1:3333",
	"http://localhost:5173", "http://127.0.0.1:5173", "http://localhost:8080", "http://127.0.0.1:8080",
	"http://localhost:8081", "http://127.0.0.1:8081", "http://localhost:8082", "http://127.0.0.1:8082",
}

// Config configures the gateway. Fields without a default of their own
// are filled by the composition root (DataDir, Probe, Replicas, Stream,
// ShutdownGrace).
type Config struct {
	// Addr (--addr) is the listen address. Default DefaultAddr.
	Addr string
	// DataDir is the data directory; an explicit workspacePath must resolve
	// inside it. Required.
	DataDir string
	// MaxMessageLength (--max-message-length) is the longest chat message
	// in UTF-16 code units; 0 means no limit. The flag's default is
	// DefaultMaxMessageLength; a Config built by hand sets it.
	MaxMessageLength int
	// BodyLimit is the largest request body in bytes. Default 1 MiB.
	BodyLimit int64
	// AllowedOrigins (--allowed-origins) are browser origins (exact
	// match) allowed besides the server's own and DesktopOrigins: they may
	// make state-changing requests and read answers (CORS).
	AllowedOrigins []string
	// AllowDevOrigins (--allow-dev-origins) also allows DevOrigins.
	AllowDevOrigins bool
	// BodyReadTimeout (--body-read-timeout) bounds the read of one request
	// body, from the end of its headers; a client that stalls is cut off.
	// It does not bound the response (event streams run on). Default
	// DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// KeepAlive is the idle interval after which an event stream gets a
	// comment line. Default 15s.
	KeepAlive time.Duration
	// Token is the bearer token non-loopback clients must send (reported as
	// wsToken by /health). Default: random per start.
	Token string
	// Probe checks the model server for /health.
	Probe llmprobe.Config
	// DefaultModel is the runners' --model, for /health (config.json's
	// defaultModel wins over it, as in the runner). Empty: none
	// configured.
	DefaultModel string
	// Mode is reported by /health: "local" (default) or "team" (the
	// default with Auth "required").
	Mode string
	// ShutdownGrace is how long Stop lets open streams finish before
	// cutting them. Default 5s.
	ShutdownGrace time.Duration
	// RequestTimeout bounds one bus request made for a JSON route.
	// Default 10s.
	RequestTimeout time.Duration
	// StartTimeout bounds the wait for a runner to accept a turn; past it
	// the chat is refused with 503 RUNNER_BUSY. Default 30s: under a burst
	// a start waits its turn rather than failing.
	StartTimeout time.Duration
	// StartResendAfter is how long a start waits for an answer before it
	// is sent again (then twice as long, and so on): well above a start's
	// usual few milliseconds, well below StartTimeout. Default 5s; tests
	// shorten it.
	StartResendAfter time.Duration
	// Auth (--auth) is AuthLocal (default: desktop trust — loopback
	// clients pass, others need Token) or AuthRequired (team server: every
	// request carries a user's bearer token; workspaces are scoped to the
	// user's teams).
	Auth string
	// RateLimit (--rate-limit) is requests per route per client per
	// RateWindow. 0 (the default) means the mode's default: off in local
	// mode (a desktop user only gets in their own way), 100 with Auth
	// "required". Negative turns it off.
	RateLimit int
	// RateLimitChat (--rate-limit-chat) overrides RateLimit for POST
	// /api/chat whenever rate limiting is on. Default (0)
	// ratelimit.DefaultRouteLimits["/api/chat"], 120.
	RateLimitChat int
	// RateWindow (--rate-limit-window) is the sliding window of the rate
	// limit. Default DefaultRateWindow.
	RateWindow time.Duration
	// Replicas is the replica count of the gateway's KV buckets (shared
	// rate-limit counters). Default 1.
	Replicas int
	// FrontendDir (--frontend-dir), when set, is a built single-page app
	// (the Waggle desktop app's dist) served at "/" with an index.html
	// fallback; the web chat then lives at /chat/. Empty: the web chat is
	// at "/".
	FrontendDir string
	// AllowedHosts (--allowed-hosts) are the names, besides localhost, the
	// listen address and any IP literal, that a request's Host may carry
	// (DNS rebinding protection): a team server's public names.
	// ".example.com" allows a domain and its subdomains; "*" turns the
	// check off.
	AllowedHosts []string
	// Stream shapes the turn-event stream; gateways and runners must agree
	// (the composition root passes both the same).
	Stream bus.TurnStreamConfig
}

// Auth modes.
const (
	AuthLocal    = "local"
	AuthRequired = "required"
)

// defaultChatLimit is the default of RateLimitChat.
var defaultChatLimit = ratelimit.DefaultRouteLimits["/api/chat"]

// RegisterFlags registers the gateway's flags on fs, with their defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", DefaultAddr, "HTTP listen address")
	flagext.IntVar(fs, &c.MaxMessageLength, "max-message-length", DefaultMaxMessageLength, "longest chat message in UTF-16 code units (0 = no limit)")
	flagext.ListVar(fs, &c.AllowedOrigins, "allowed-origins", nil, "comma list of browser origins (exact match) allowed besides the server's own and the desktop app's")
	fs.BoolVar(&c.AllowDevOrigins, "allow-dev-origins", false, "also allow the generic development-server origins (localhost/127.0.0.1 ports 3000, 3333, 5173, 8080-8082)")
	flagext.DurationVar(fs, &c.BodyReadTimeout, "body-read-timeout", DefaultBodyReadTimeout, "longest read of one request body; a stalled client is cut off")
	flagext.ListVar(fs, &c.AllowedHosts, "allowed-hosts", nil, "comma list of host names the server answers to besides localhost, its listen address and IP addresses (DNS rebinding protection; .example.com = domain and subdomains, * = off)")
	flagext.EnumVar(fs, &c.Auth, "auth", AuthLocal, "local (desktop trust: loopback passes, others need the /health token) or required (team server: every request needs a user token)",
		AuthLocal, AuthRequired)
	flagext.IntVar(fs, &c.RateLimit, "rate-limit", 0, "requests per route per client per window (0 = off locally, 100 with --auth=required; negative = off)")
	flagext.IntVar(fs, &c.RateLimitChat, "rate-limit-chat", defaultChatLimit, "rate limit of POST /api/chat when rate limiting is on")
	flagext.DurationVar(fs, &c.RateWindow, "rate-limit-window", DefaultRateWindow, "sliding window of the rate limit")
	flagext.PathVar(fs, &c.FrontendDir, "frontend-dir", "", "built single-page app (the Waggle desktop app's dist) to serve at / with an index.html fallback; the web chat moves to /chat/")
}

// Validate reports settings that cannot work, each on its own terms: no
// defaults are filled and nothing outside c is looked at (the listen
// address, the data dir, the model URL and the frontend dir are checked
// by Start).
func (c Config) Validate() error {
	if c.MaxMessageLength < 0 {
		return errors.New("gateway: the max message length must not be negative (0 = no limit; --max-message-length)")
	}
	switch c.Auth {
	case "", AuthLocal, AuthRequired:
	default:
		return fmt.Errorf("gateway: auth mode %q: want local or required", c.Auth)
	}
	for _, o := range c.AllowedOrigins {
		if err := checkOrigin(o); err != nil {
			return err
		}
	}
	if c.BodyReadTimeout < 0 {
		return errors.New("gateway: the body read timeout must not be negative (--body-read-timeout)")
	}
	return nil
}

// withDefaults is c with every unset field that has a default filled in.
func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.BodyLimit <= 0 {
		c.BodyLimit = 1 << 20
	}
	if c.BodyReadTimeout <= 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 15 * time.Second
	}
	if c.Auth == "" {
		c.Auth = AuthLocal
	}
	if c.Mode == "" {
		c.Mode = "local"
		if c.Auth == AuthRequired {
			c.Mode = "team"
		}
	}
	if c.RateLimitChat <= 0 {
		c.RateLimitChat = defaultChatLimit
	}
	if c.RateWindow <= 0 {
		c.RateWindow = DefaultRateWindow
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.StartResendAfter <= 0 {
		c.StartResendAfter = 5 * time.Second
	}
	return c
}

// prepare fills c's defaults and checks everything Start needs: Validate,
// then the listen address, the data dir (made absolute), the probe, the
// rate limits and the frontend dir; an unset Token is drawn at random.
func (c *Config) prepare() error {
	*c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("gateway: listen address %q: %w", c.Addr, err)
	}
	if c.DataDir == "" {
		return errors.New("gateway: DataDir is required")
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("gateway: data dir: %w", err)
	}
	c.DataDir = abs
	if c.Token == "" {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("gateway: token: %w", err)
		}
		c.Token = hex.EncodeToString(b[:])
	}
	if err := c.Probe.Validate(); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if l, on := c.limits(); on {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	if c.FrontendDir != "" {
		if err := spa.Check(c.FrontendDir); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	return nil
}

// origins are the browser origins allowed besides the server's own, in
// order: the desktop app's, the development servers' when opted in, the
// operator's. The first is the fallback Access-Control-Allow-Origin of
// event streams.
func (c *Config) origins() []string {
	out := slices.Clone(DesktopOrigins)
	if c.AllowDevOrigins {
		out = append(out, DevOrigins...)
	}
	for _, o := range c.AllowedOrigins {
		if o = normalizeOrigin(o); o != "" && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// checkOrigin reports an --allowed-origins entry that is not an origin
// (scheme://host[:port], nothing after it): such an entry could never
// match, and "*" would open the server to every page.
func checkOrigin(o string) error {
	o = normalizeOrigin(o)
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("gateway: --allowed-origins entry %q is not an origin (scheme://host[:port])", o)
	}
	return nil
}

// limits is the rate-limit configuration for the mode, or ok=false when
// rate limiting is off.
func (c *Config) limits() (ratelimit.Config, bool) {
	limit := c.RateLimit
	if limit == 0 && c.Auth == AuthRequired {
		limit = 100
	}
	if limit <= 0 {
		return ratelimit.Config{Limit: -1}, false
	}
	chat := c.RateLimitChat
	if chat <= 0 {
		chat = defaultChatLimit
	}
	return ratelimit.Config{Limit: limit, RouteLimits: map[string]int{"/api/chat": chat}, Window: c.RateWindow, Replicas: c.Replicas}, true
}
