// Package flagext holds the flag.Value types the services' configs
// register their flags with (after dskit's flagext): whole numbers,
// durations, sizes, comma lists, one-of choices and paths, each parsed the
// way Waggle's command line always has, with an error that says what is
// wanted. A default is given once, at registration, and stored in the
// target variable at once, so a config registered on a throwaway FlagSet
// holds its defaults.
package flagext

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// IntVar registers a whole-number flag (decimal, as strconv.Atoi reads it).
func IntVar(fs *flag.FlagSet, p *int, name string, def int, usage string) {
	*p = def
	fs.Var((*intValue)(p), name, usage)
}

type intValue int

func (v *intValue) String() string { return strconv.Itoa(int(*v)) }

func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want a whole number")
	}
	*v = intValue(n)
	return nil
}

// DurationVar registers a duration flag (time.ParseDuration syntax).
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*durationValue)(p), name, usage)
}

type durationValue time.Duration

// String writes the duration without zero trailing units: 5m, not 5m0s.
func (v *durationValue) String() string {
	s := time.Duration(*v).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration such as 15ms, 5s or 2m")
	}
	*v = durationValue(d)
	return nil
}

// BytesVar registers a size flag: a positive whole number of bytes with an
// optional binary suffix (KiB, MiB, GiB; K, M, G mean the same).
func BytesVar(fs *flag.FlagSet, p *int64, name string, def int64, usage string) {
	*p = def
	fs.Var((*bytesValue)(p), name, usage)
}

type bytesValue int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}

// String writes the size in the largest binary unit that divides it.
func (v *bytesValue) String() string {
	n := int64(*v)
	for _, u := range sizeUnits[:3] {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func (v *bytesValue) Set(s string) error {
	mult := int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return errors.New("want a positive size such as 64MiB")
	}
	*v = bytesValue(n * mult)
	return nil
}

// ListVar registers a comma-separated list flag; blanks around items and
// empty items are dropped, so "" is the empty (nil) list.
func ListVar(fs *flag.FlagSet, p *[]string, name string, def []string, usage string) {
	*p = def
	fs.Var((*listValue)(p), name, usage)
}

type listValue []string

func (v *listValue) String() string { return strings.Join(*v, ",") }

func (v *listValue) Set(s string) error {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	*v = out
	return nil
}

// EnumVar registers a flag whose value is one of allowed (listed in the
// order the error message names them).
func EnumVar(fs *flag.FlagSet, p *string, name, def, usage string, allowed ...string) {
	*p = def
	fs.Var(&enumValue{p: p, allowed: allowed}, name, usage)
}

type enumValue struct {
	p       *string
	allowed []string
}

func (v *enumValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v *enumValue) Set(s string) error {
	for _, a := range v.allowed {
		if s == a {
			*v.p = s
			return nil
		}
	}
	return errors.New("want " + OneOf(v.allowed...))
}

// OneOf names choices for a message: "a, b or c".
func OneOf(choices ...string) string {
	if len(choices) < 2 {
		return strings.Join(choices, "")
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}

// PathVar registers a path flag; a leading ~ or ~/ is the user's home
// directory, and a relative path is made absolute against the working
// directory when the flag is set — once, at start — so a service that
// later confines files to it (the file tools insist on an absolute root)
// never sees a relative one.
func PathVar(fs *flag.FlagSet, p *string, name, def, usage string) {
	*p = def
	fs.Var((*pathValue)(p), name, usage)
}

type pathValue string

func (v *pathValue) String() string { return string(*v) }

func (v *pathValue) Set(s string) error {
	p := ExpandHome(s)
	if p != "" && !filepath.IsAbs(p) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("cannot make %q absolute: %w", s, err)
		}
		p = abs
	}
	*v = pathValue(p)
	return nil
}

// ExpandHome replaces a leading ~ or ~/ of p with the user's home
// directory (left as is when there is none).
func ExpandHome(p string) string {
	home, err := os.UserHomeDir()
	if err != nil {
		home = ""
	}
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}
