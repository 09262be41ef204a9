package app

import (
	"io"
	"strings"
	"testing"
)

// TestListenAddressPrecedence: flags > WAGGLE_ADDR > WAGGLE_HOST/WAGGLE_PORT
// (what the Waggle desktop app sets for its sidecar) > 127.0.0.1:3333. The
// host stays loopback unless asked, unlike the original's 0.0.0.0.
func TestListenAddressPrecedence(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
		err  string
	}{
		{name: "default", want: "127.0.0.1:3333"},
		{name: "port only", env: map[string]string{"WAGGLE_PORT": "4123"}, want: "127.0.0.1:4123"},
		{name: "host only", env: map[string]string{"WAGGLE_HOST": "0.0.0.0"}, want: "0.0.0.0:3333"},
		{name: "host and port", env: map[string]string{"WAGGLE_HOST": "192.168.1.5", "WAGGLE_PORT": "4123"}, want: "192.168.1.5:4123"},
		{name: "ipv6 host", env: map[string]string{"WAGGLE_HOST": "::1", "WAGGLE_PORT": "4123"}, want: "[::1]:4123"},
		{name: "bracketed ipv6 host", env: map[string]string{"WAGGLE_HOST": "[::1]"}, want: "[::1]:3333"},
		{name: "empty host is loopback", env: map[string]string{"WAGGLE_HOST": "", "WAGGLE_PORT": "4123"}, want: "127.0.0.1:4123"},
		{name: "WAGGLE_ADDR wins", env: map[string]string{"WAGGLE_ADDR": "127.0.0.1:5000", "WAGGLE_PORT": "4123", "WAGGLE_HOST": "0.0.0.0"}, want: "127.0.0.1:5000"},
		{name: "flag wins", args: []string{"--addr", "127.0.0.1:6000"}, env: map[string]string{"WAGGLE_ADDR": "127.0.0.1:5000", "WAGGLE_PORT": "4123"}, want: "127.0.0.1:6000"},
		{name: "bad port", env: map[string]string{"WAGGLE_PORT": "http"}, err: `invalid WAGGLE_PORT "http"`},
		{name: "port out of range", env: map[string]string{"WAGGLE_PORT": "70000"}, err: `invalid WAGGLE_PORT "70000"`},
		{name: "bad port ignored under WAGGLE_ADDR", env: map[string]string{"WAGGLE_ADDR": "127.0.0.1:5000", "WAGGLE_PORT": "x"}, want: "127.0.0.1:5000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"WAGGLE_DATA_DIR": t.TempDir()}
			for k, v := range tt.env {
				env[k] = v
			}
			lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
			c, err := ParseServe(tt.args, lookup, io.Discard)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Gateway.Addr != tt.want {
				t.Fatalf("addr %q, want %q", c.Gateway.Addr, tt.want)
			}
		})
	}
}

func TestFrontendDirSetting(t *testing.T) {
	data := t.TempDir()
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, ""},
		{nil, map[string]string{"WAGGLE_FRONTEND_DIR": "/opt/waggle/dist"}, "/opt/waggle/dist"},
		{[]string{"--frontend-dir", "/srv/dist"}, map[string]string{"WAGGLE_FRONTEND_DIR": "/opt/waggle/dist"}, "/srv/dist"},
	}
	for _, tt := range tests {
		env := map[string]string{"WAGGLE_DATA_DIR": data}
		for k, v := range tt.env {
			env[k] = v
		}
		c, err := ParseServe(tt.args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.Gateway.FrontendDir != tt.want {
			t.Errorf("%v %v: frontend dir %q, want %q", tt.args, tt.env, c.Gateway.FrontendDir, tt.want)
		}
	}
}
