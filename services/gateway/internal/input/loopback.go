package input

import (
	"net"
	"net/http"
	"net/netip"
)

// DirectLoopback reports whether r came straight from this machine: a
// loopback peer and no proxy header (a local reverse proxy relays remote
// clients from loopback too).
func DirectLoopback(r *http.Request) bool {
	h := r.Header
	if h.Get("Forwarded") != "" || h.Get("X-Forwarded-For") != "" || h.Get("X-Real-IP") != "" {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
