package input

import "testing"

// TestSameOrigin: the server's own page is the Origin whose host:port is
// the request's Host, default ports filled in by scheme; anything else
// (another host or port, a path, credentials, tauri://, null) is not.
func TestSameOrigin(t *testing.T) {
	for _, tt := range []struct {
		origin, host string
		want         bool
	}{
		{"http://127.0.0.1:3333", "127.0.0.1:3333", true},
		{"http://localhost:3333", "localhost:3333", true},
		{"http://localhost:3333", "127.0.0.1:3333", false},
		{"http://127.0.0.1:3334", "127.0.0.1:3333", false},
		{"http://[::1]:3333", "[::1]:3333", true},
		{"https://waggle.example.com", "waggle.example.com", true}, // TLS proxy
		{"http://waggle.example.com", "waggle.example.com", true},
		{"https://waggle.example.com", "waggle.example.com:443", true},
		{"http://waggle.example.com", "waggle.example.com:443", false},
		{"http://waggle.example.com:80", "waggle.example.com", true},
		{"http://evil.example", "127.0.0.1:3333", false},
		{"tauri://localhost", "localhost", false},
		{"null", "127.0.0.1:3333", false},
		{"http://127.0.0.1:3333/path", "127.0.0.1:3333", false},
		{"http://user@127.0.0.1:3333", "127.0.0.1:3333", false},
		{"http://127.0.0.1:3333", "", false},
	} {
		if got := SameOrigin(tt.origin, tt.host); got != tt.want {
			t.Errorf("SameOrigin(%q, %q) = %v, want %v", tt.origin, tt.host, got, tt.want)
		}
	}
}
