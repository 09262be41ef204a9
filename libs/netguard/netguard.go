// Package netguard tells public internet addresses from the ones a server
// must not be made to reach on a user's behalf — loopback, link-local (the
// cloud metadata address 169.254.169.254 included), private, unique-local,
// CGNAT, multicast, unspecified — and gives the net.Dialer Control hook
// that enforces it on the resolved address of every connection.
//
// Checking the address the dialer is about to connect to, rather than a
// URL's host name, is what defeats DNS names that resolve to private
// addresses, DNS rebinding and redirects: whatever name led there, the
// connection itself is refused.
package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// ErrPrivateAddress is a connection refused because its address is not a
// public one.
var ErrPrivateAddress = errors.New("the address is not a public one")

// cgnat is the shared address space of RFC 6598, used inside providers.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// IsPublic reports whether addr is a unicast address on the internet: not
// loopback, link-local, private (RFC 1918, IPv6 unique-local), CGNAT,
// multicast or unspecified. An IPv4-mapped IPv6 address is judged as the
// IPv4 address it carries.
func IsPublic(addr netip.Addr) bool {
	addr = addr.Unmap()
	return addr.IsValid() && addr.IsGlobalUnicast() && !addr.IsPrivate() &&
		!addr.IsLoopback() && !addr.IsLinkLocalUnicast() && !cgnat.Contains(addr)
}

// Control returns a net.Dialer Control hook that lets a connection through
// only when allow says yes to its address (an "ip:port" the dialer has
// already resolved); anything else, an unparsable address included, is
// refused with an error wrapping ErrPrivateAddress. allow nil is IsPublic.
func Control(allow func(netip.Addr) bool) func(network, address string, c syscall.RawConn) error {
	if allow == nil {
		allow = IsPublic
	}
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrPrivateAddress, address)
		}
		if !allow(ap.Addr().Unmap()) {
			return fmt.Errorf("%w: %s", ErrPrivateAddress, ap.Addr().Unmap())
		}
		return nil
	}
}

// PublicOnly is the Control hook that admits public addresses only.
var PublicOnly = Control(IsPublic)
