package mcp

import (
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/waggle-os/core/libs/netguard"
)

// errPrivateAddress is a dial refused because the address is not public.
var errPrivateAddress = netguard.ErrPrivateAddress

// errUnreachable is what a team server shows for any failure to reach an
// HTTP server: the same text whether the address was refused, did not
// answer or answered wrongly, so the state of a server is no oracle for
// what lies on the runner's network. The details are logged.
var errUnreachable = errors.New("could not connect to the MCP server")

// publicOnly is the dialer Control hook of a guarded client: it refuses a
// connection to any address that is not public (netguard.IsPublic). It
// sees the resolved address of every connection, so a DNS name that
// resolves to a private address and every redirect are caught.
var publicOnly = netguard.PublicOnly

// httpClient is the client of an HTTP server: guarded, it dials public
// addresses only and uses no proxy (a proxy would dial for it, unchecked).
func httpClient(headers http.Header, guarded bool) *http.Client {
	base := http.DefaultTransport
	if guarded {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: publicOnly}
		t.DialContext = d.DialContext
		base = t
	}
	return &http.Client{Transport: headerTransport{headers: headers, base: base}}
}

// guarded says whether the server, if it is an HTTP one, may reach public
// addresses only: a workspace's server on a team server without
// AllowPrivateURLs. Its URL was set by a team admin, who is not the
// operator; the global servers of config.json are the operator's own.
func (s *server) guarded() bool {
	return s.key.workspace != "" && s.m.cfg.TeamServer && !s.m.cfg.AllowPrivateURLs
}
