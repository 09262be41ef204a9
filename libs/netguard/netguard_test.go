package netguard

import (
	"errors"
	"net/netip"
	"testing"
)

// TestPublicOnly: the dial hook lets public addresses through and refuses
// every kind of address a caller could aim a server at.
func TestPublicOnly(t *testing.T) {
	for _, addr := range []string{"93.184.216.34:443", "[2606:2800:220:1:248:1893:25c8:1946]:443"} {
		if err := PublicOnly("tcp", addr, nil); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
	for _, addr := range []string{
		"127.0.0.1:80", "[::1]:80", "169.254.169.254:80", "10.0.0.1:80", "172.16.0.1:80", "192.168.1.1:80",
		"100.64.0.1:80", "0.0.0.0:80", "[::]:80", "[fe80::1]:80", "[fd00::1]:80", "[::ffff:127.0.0.1]:80", "224.0.0.1:80", "not-an-address",
	} {
		if err := PublicOnly("tcp", addr, nil); !errors.Is(err, ErrPrivateAddress) {
			t.Errorf("%s: %v, want refused", addr, err)
		}
	}
}

// TestControlAllow: a custom allow decides, and sees mapped addresses
// unmapped.
func TestControlAllow(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	hook := Control(func(a netip.Addr) bool { return a == lo })
	if err := hook("tcp", "[::ffff:127.0.0.1]:80", nil); err != nil {
		t.Errorf("allowed address refused: %v", err)
	}
	if err := hook("tcp", "127.0.0.2:80", nil); !errors.Is(err, ErrPrivateAddress) {
		t.Errorf("127.0.0.2: %v, want refused", err)
	}
}
