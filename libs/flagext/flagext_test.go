package flagext

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestValues: each value type parses what Waggle's command line always
// accepted, shows its default in the written form, and says what it wants
// on bad input.
func TestValues(t *testing.T) {
	var (
		n    int
		d    time.Duration
		b    int64
		list []string
		e    string
		p    string
	)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	IntVar(fs, &n, "n", 50000, "")
	DurationVar(fs, &d, "d", 5*time.Minute, "")
	BytesVar(fs, &b, "b", 64<<20, "")
	ListVar(fs, &list, "list", []string{"all"}, "")
	EnumVar(fs, &e, "e", "auto", "", "true", "false", "auto")
	PathVar(fs, &p, "p", "", "")
	if n != 50000 || d != 5*time.Minute || b != 64<<20 || !reflect.DeepEqual(list, []string{"all"}) || e != "auto" || p != "" {
		t.Fatalf("defaults not stored: %v %v %v %v %q %q", n, d, b, list, e, p)
	}
	defs := map[string]string{"n": "50000", "d": "5m", "b": "64MiB", "list": "all", "e": "auto", "p": ""}
	for name, want := range defs {
		if got := fs.Lookup(name).DefValue; got != want {
			t.Errorf("default of -%s shown as %q, want %q", name, got, want)
		}
	}
	home, _ := os.UserHomeDir()
	wd, _ := os.Getwd()
	tests := []struct {
		flag, in string
		want     any
		err      string
	}{
		{"n", "10", 10, ""},
		{"n", "010", 10, ""}, // decimal, not octal
		{"n", "-1", -1, ""},
		{"n", "lots", nil, "want a whole number"},
		{"d", "0", time.Duration(0), ""},
		{"d", "90s", 90 * time.Second, ""},
		{"d", "fast", nil, "want a duration such as 15ms, 5s or 2m"},
		{"b", "1024", int64(1024), ""},
		{"b", "2KiB", int64(2048), ""},
		{"b", "3 M", int64(3 << 20), ""},
		{"b", "1GiB", int64(1 << 30), ""},
		{"b", "0", nil, "want a positive size such as 64MiB"},
		{"b", "big", nil, "want a positive size such as 64MiB"},
		{"list", " a, b ,,c ", []string{"a", "b", "c"}, ""},
		{"list", "", []string(nil), ""},
		{"e", "false", "false", ""},
		{"e", "maybe", nil, "want true, false or auto"},
		{"p", "~/dist", filepath.Join(home, "dist"), ""},
		{"p", "/srv/dist", "/srv/dist", ""},
		{"p", "data", filepath.Join(wd, "data"), ""},
		{"p", ".cluster/data/../data", filepath.Join(wd, ".cluster/data"), ""},
		{"p", "", "", ""},
	}
	get := map[string]func() any{
		"n": func() any { return n }, "d": func() any { return d }, "b": func() any { return b },
		"list": func() any { return list }, "e": func() any { return e }, "p": func() any { return p },
	}
	for _, tt := range tests {
		err := fs.Lookup(tt.flag).Value.Set(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("-%s %q: err %v, want %q", tt.flag, tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("-%s %q: %v", tt.flag, tt.in, err)
			continue
		}
		if got := get[tt.flag](); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("-%s %q = %#v, want %#v", tt.flag, tt.in, got, tt.want)
		}
	}
}

func TestDurationString(t *testing.T) {
	for d, want := range map[time.Duration]string{
		15 * time.Millisecond: "15ms", 30 * time.Second: "30s", time.Minute: "1m", 5 * time.Minute: "5m",
		90 * time.Minute: "1h30m", time.Hour: "1h", 0: "0s", 61 * time.Second: "1m1s",
	} {
		v := durationValue(d)
		if got := v.String(); got != want {
			t.Errorf("%v shown as %q, want %q", time.Duration(d), got, want)
		}
	}
}

func TestOneOf(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
	}{{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a or b"}, {[]string{"a", "b", "c"}, "a, b or c"}} {
		if got := OneOf(tt.in...); got != tt.want {
			t.Errorf("OneOf(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
