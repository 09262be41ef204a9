package chatstream

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Defaults of Model.
const (
	DefaultBaseURL               = "http://localhost:4000/v1"
	DefaultResponseHeaderTimeout = 2 * time.Minute
)

// Model says where an OpenAI-compatible model server is and how to reach
// it: what the agent loop and the retrieval runner share. Zero fields take
// the documented defaults.
type Model struct {
	// BaseURL is the base URL including /v1; default DefaultBaseURL.
	BaseURL string
	// APIKey is sent as a bearer token when not empty.
	APIKey string
	// ResponseHeaderTimeout bounds the wait for the model's response
	// headers; default 2m. Ignored with HTTPClient.
	ResponseHeaderTimeout time.Duration
	// HTTPClient replaces the default client. It must not set a Timeout
	// shorter than a whole streamed reply.
	HTTPClient *http.Client
}

// WithDefaults fills the zero fields.
func (m Model) WithDefaults() Model {
	if m.BaseURL == "" {
		m.BaseURL = DefaultBaseURL
	}
	if m.ResponseHeaderTimeout == 0 {
		m.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	return m
}

// Validate reports a model address that cannot work (after defaults);
// owner prefixes the error ("agent", "retrieval").
func (m Model) Validate(owner string) error {
	m = m.WithDefaults()
	u, err := url.Parse(m.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: base URL %q is not an http(s) URL", owner, m.BaseURL)
	}
	if m.ResponseHeaderTimeout < 0 {
		return errors.New(owner + ": negative response header timeout")
	}
	return nil
}

// Client is the go-openai client for m (after defaults). wrap, when not
// nil, wraps the HTTP transport (the agent sets the turn's key and reads
// Retry-After there).
func (m Model) Client(wrap func(http.RoundTripper) http.RoundTripper) *openai.Client {
	var c http.Client
	if m.HTTPClient != nil {
		c = *m.HTTPClient
	}
	base := c.Transport
	if base == nil {
		if m.HTTPClient != nil {
			base = http.DefaultTransport
		} else {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.ResponseHeaderTimeout = m.ResponseHeaderTimeout
			base = t
		}
	}
	if wrap != nil {
		base = wrap(base)
	}
	c.Transport = base
	oc := openai.DefaultConfig(m.APIKey)
	oc.BaseURL = strings.TrimRight(m.BaseURL, "/")
	oc.HTTPClient = &c
	return openai.NewClientWithConfig(oc)
}
