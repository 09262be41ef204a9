package gateway

import (
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

// HostNotAllowed is the error code of a request refused by the Host check.
const HostNotAllowed = "HOST_NOT_ALLOWED"

// hostNotAllowedMessage names the fix for the operator without echoing the
// client's Host back.
const hostNotAllowedMessage = "Host not allowed: this server answers only to its own names (add others with --allowed-hosts)"

// hostPolicy decides which Host headers the gateway answers, against DNS
// rebinding (Ollama's CVE-2024-28224): a web page whose name is re-pointed
// at 127.0.0.1 reaches the server same-origin, so CORS does not stop it,
// but its requests still carry the page's own name in Host. Only names
// matter: an IP literal cannot be rebound, so every IP literal passes (as
// in Vite and webpack-dev-server), which also covers a 0.0.0.0 bind
// reached through NAT or a container's port mapping, addresses the process
// cannot list. Ports are not compared either: the attack is in the name,
// and development proxies forward their own port.
type hostPolicy struct {
	any     bool            // "*" configured: the check is off
	names   map[string]bool // exact names, lower case, no trailing dot
	domains []string        // ".example.com": the domain and its subdomains
}

// newHostPolicy builds the policy from the listen address (its host, when a
// name, is the server's own), the machine's host name (when the listener is
// not loopback only) and the operator's names. A name starting with a dot
// (or "*.") allows that domain and every subdomain; "*" turns the check
// off.
func newHostPolicy(listenAddr, hostname string, allowed []string) *hostPolicy {
	p := &hostPolicy{names: map[string]bool{"localhost": true}}
	listenHost, _, err := net.SplitHostPort(listenAddr)
	if err != nil {
		listenHost = listenAddr
	}
	if name := normalizeHost(listenHost); name != "" {
		if _, err := netip.ParseAddr(name); err != nil {
			p.names[name] = true
		}
	}
	if hostname != "" && !loopbackListener(listenHost) {
		// A LAN client reaching a 0.0.0.0 bind by the machine's name. An
		// attacker cannot serve a page under a victim's machine name.
		if h := normalizeHost(hostname); h != "" {
			p.names[h] = true
			if short, _, ok := strings.Cut(h, "."); ok && short != "" {
				p.names[short] = true
			}
		}
	}
	for _, a := range allowed {
		a = normalizeHost(strings.TrimSpace(a))
		switch {
		case a == "":
		case a == "*":
			p.any = true
		case strings.HasPrefix(a, "*."):
			p.domains = append(p.domains, a[1:])
		case strings.HasPrefix(a, "."):
			if len(a) > 1 {
				p.domains = append(p.domains, a)
			}
		default:
			p.names[a] = true
		}
	}
	return p
}

// allows reports whether a request with this Host header is answered.
func (p *hostPolicy) allows(hostHeader string) bool {
	if p.any {
		return true
	}
	name := normalizeHost(hostOnly(hostHeader))
	if name == "" {
		return false
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	// RFC 6761: browsers resolve *.localhost to loopback themselves; no
	// DNS answer can move it.
	if p.names[name] || strings.HasSuffix(name, ".localhost") {
		return true
	}
	for _, d := range p.domains {
		if name == d[1:] || strings.HasSuffix(name, d) {
			return true
		}
	}
	return false
}

// hostOnly strips the port and the IPv6 brackets from a Host header.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		return h[1 : len(h)-1]
	}
	return h
}

// normalizeHost lower-cases a name and drops one trailing dot
// ("localhost." is localhost). Anything that cannot be a host name or an
// IP literal becomes "" and is refused.
func normalizeHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	for _, c := range h {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.', c == ':', c == '_', c == '*', c == '%':
		default:
			return ""
		}
	}
	return h
}

// loopbackListener reports whether a listen host accepts loopback clients
// only.
func loopbackListener(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// machineHostname is the machine's name for the policy, "" when unknown.
func machineHostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// hostCheck refuses, before any other work, a request whose Host is not one
// of the server's own names. A request with no Host at all (HTTP/1.0: a
// health checker; net/http refuses HTTP/1.1 without one) passes: browsers
// always send Host, so it cannot be a rebound page.
func (s *Service) hostCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "" && !s.hosts.allows(r.Host) {
			s.log.Warn("request refused: Host not allowed (set --allowed-hosts if this name is the server's)",
				"host", r.Host, "path", r.URL.Path, "remote", r.RemoteAddr)
			respond.Fail(w, protocol.Forbidden, HostNotAllowed, hostNotAllowedMessage)
			return
		}
		next.ServeHTTP(w, r)
	})
}
