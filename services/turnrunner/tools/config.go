package tools

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/waggle-os/core/services/turnrunner/tools/pdftext"
)

// Config tunes the built-in tools. Zero numeric fields take their defaults.
type Config struct {
	// BashTimeout is the time limit of a bash command when the model does not
	// ask for one. Default 30s.
	BashTimeout time.Duration
	// BashMaxTimeout caps the timeout a model may ask for. Default 10m.
	BashMaxTimeout time.Duration
	// BashOutputLimit caps the combined stdout+stderr returned by bash, in
	// bytes; the start and the end are kept. Default 64 KiB.
	BashOutputLimit int
	// ReadLimit is the most bytes read_file returns in one call. Default 256 KiB.
	ReadLimit int64
	// ListLimit is the most entries list_files returns. Default 500.
	ListLimit int
	// SearchLimit is the most paths search_files returns and the most
	// matching lines search_content returns. Default 200.
	SearchLimit int
	// SearchMaxFileSize: search_content skips larger files. Default 8 MiB.
	SearchMaxFileSize int64
	// EnableBash registers the bash tool. The zero value leaves it out (the
	// safe choice for team servers); DefaultConfig, used in local mode,
	// turns it on.
	EnableBash bool
	// BashSandbox, when set, is the bubblewrap (bwrap) binary every bash
	// command runs under: the host read-only, the workspace directory the
	// only writable place, SandboxHide and home directories hidden, no
	// network, no other processes. Team servers set it; empty runs bash
	// directly (the desktop).
	BashSandbox string
	// SandboxHide are directories a sandboxed command must not even read
	// (the data directory, with every other workspace); the command's own
	// workspace is mounted back inside it.
	SandboxHide []string
	// WebFetchAllowPrivate lets web_fetch reach loopback, link-local,
	// private and metadata addresses, each fetch after a human approval.
	// The zero value refuses them outright (a team server without
	// --web-fetch-allow-private); DefaultConfig, the desktop, allows them.
	WebFetchAllowPrivate bool
	// WebFetchTimeout bounds one web_fetch, redirects and body included.
	// Default 20s.
	WebFetchTimeout time.Duration
	// WebFetchMaxBytes is the most of a response body web_fetch reads; the
	// rest is not downloaded. Default 2 MiB.
	WebFetchMaxBytes int64
	// DocumentTimeout bounds read_document's reading of one PDF (in a
	// worker process, killed at the limit). Default pdftext.DefaultTimeout
	// (1m).
	DocumentTimeout time.Duration

	// webFetchIsPublic and webFetchLookup replace netguard.IsPublic and
	// the DNS resolver in tests, so loopback servers can play public ones.
	webFetchIsPublic func(netip.Addr) bool
	webFetchLookup   func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Defaults of Config's numeric fields.
const (
	DefaultBashTimeout       = 30 * time.Second
	DefaultBashMaxTimeout    = 10 * time.Minute
	DefaultBashOutputLimit   = 64 << 10
	DefaultReadLimit         = 256 << 10
	DefaultListLimit         = 500
	DefaultSearchLimit       = 200
	DefaultSearchMaxFileSize = 8 << 20
)

// DefaultConfig is the local-mode configuration: every default, bash on.
func DefaultConfig() Config {
	return Config{EnableBash: true, WebFetchAllowPrivate: true}.withDefaults()
}

// Validate reports fields set to values the tools cannot work with.
func (c Config) Validate() error {
	var errs []error
	neg := func(name string, v int64) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("tools: config: %s must not be negative", name))
		}
	}
	neg("BashTimeout", int64(c.BashTimeout))
	neg("BashMaxTimeout", int64(c.BashMaxTimeout))
	neg("BashOutputLimit", int64(c.BashOutputLimit))
	neg("ReadLimit", c.ReadLimit)
	neg("ListLimit", int64(c.ListLimit))
	neg("SearchLimit", int64(c.SearchLimit))
	neg("SearchMaxFileSize", c.SearchMaxFileSize)
	neg("WebFetchTimeout", int64(c.WebFetchTimeout))
	neg("WebFetchMaxBytes", c.WebFetchMaxBytes)
	neg("DocumentTimeout", int64(c.DocumentTimeout))
	d := c.withDefaults()
	if d.BashTimeout > d.BashMaxTimeout {
		errs = append(errs, fmt.Errorf("tools: config: BashTimeout %v exceeds BashMaxTimeout %v", d.BashTimeout, d.BashMaxTimeout))
	}
	return errors.Join(errs...)
}

// withDefaults fills zero (and, defensively, negative) fields.
func (c Config) withDefaults() Config {
	if c.BashTimeout <= 0 {
		c.BashTimeout = DefaultBashTimeout
	}
	if c.BashMaxTimeout <= 0 {
		c.BashMaxTimeout = max(DefaultBashMaxTimeout, c.BashTimeout)
	}
	if c.BashOutputLimit <= 0 {
		c.BashOutputLimit = DefaultBashOutputLimit
	}
	if c.ReadLimit <= 0 {
		c.ReadLimit = DefaultReadLimit
	}
	if c.ListLimit <= 0 {
		c.ListLimit = DefaultListLimit
	}
	if c.SearchLimit <= 0 {
		c.SearchLimit = DefaultSearchLimit
	}
	if c.SearchMaxFileSize <= 0 {
		c.SearchMaxFileSize = DefaultSearchMaxFileSize
	}
	if c.WebFetchTimeout <= 0 {
		c.WebFetchTimeout = DefaultWebFetchTimeout
	}
	if c.WebFetchMaxBytes <= 0 {
		c.WebFetchMaxBytes = DefaultWebFetchMaxBytes
	}
	if c.DocumentTimeout <= 0 {
		c.DocumentTimeout = pdftext.DefaultTimeout
	}
	return c
}
