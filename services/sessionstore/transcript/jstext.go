package transcript

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// isJSSpace reports whether r is whitespace for String.prototype.trim, which
// differs from unicode.IsSpace (it includes U+FEFF and excludes U+0085).
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

func jsTrim(s string) string { return strings.TrimFunc(s, isJSSpace) }

func jsTrimBytes(b []byte) []byte { return bytes.TrimFunc(b, isJSSpace) }

// truncateEllipsis cuts s to keep units, appending "...", when s is longer
// than limit UTF-16 units (the 80→77 and 200→197 rules).
func truncateEllipsis(s string, limit, keep int) string {
	if protocol.UTF16Len(s) > limit {
		return protocol.SliceUTF16(s, 0, keep) + "..."
	}
	return s
}

// jsonString encodes s as JSON.stringify does: only '"', '\\' and control
// characters are escaped (no HTML or U+2028 escaping, unlike encoding/json).
func jsonString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[r>>4])
				b.WriteByte("0123456789abcdef"[r&0xf])
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// parseJSDate parses the date strings `new Date(s)` accepts in practice (the
// ISO 8601 forms, with 'T' or a space). As in JavaScript, a date-only form
// is UTC and a date-time without an offset is local time (loc).
func parseJSDate(s string, loc *time.Location) (time.Time, bool) {
	if loc == nil {
		loc = time.Local
	}
	p := dateParser{s: s}
	year, ok := p.digits(4)
	if !ok {
		return time.Time{}, false
	}
	month, day := 1, 1
	if p.eat('-') {
		if month, ok = p.digits(2); !ok {
			return time.Time{}, false
		}
		if p.eat('-') {
			if day, ok = p.digits(2); !ok {
				return time.Time{}, false
			}
		}
	}
	hour, minute, sec, nsec := 0, 0, 0, 0
	hasTime := false
	if p.eat('T') || p.eat('t') || p.eat(' ') {
		hasTime = true
		if hour, ok = p.digits(2); !ok || !p.eat(':') {
			return time.Time{}, false
		}
		if minute, ok = p.digits(2); !ok {
			return time.Time{}, false
		}
		if p.eat(':') {
			if sec, ok = p.digits(2); !ok {
				return time.Time{}, false
			}
			if p.eat('.') || p.eat(',') {
				frac := p.run()
				if frac == "" {
					return time.Time{}, false
				}
				// Date keeps milliseconds only.
				frac = (frac + "00")[:3]
				ms, _ := strconv.Atoi(frac)
				nsec = ms * int(time.Millisecond)
			}
		}
	}
	zone := loc
	if !hasTime {
		zone = time.UTC
	}
	switch {
	case p.eat('Z') || p.eat('z'):
		zone = time.UTC
	case p.peek('+') || p.peek('-'):
		sign := 1
		if p.s[p.i] == '-' {
			sign = -1
		}
		p.i++
		oh, ok1 := p.digits(2)
		p.eat(':')
		om, ok2 := p.digits(2)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return time.Time{}, false
		}
		zone = time.FixedZone("", sign*(oh*3600+om*60))
	}
	// V8 takes any day up to 31 and lets it overflow into the next month
	// ("2026-02-31" is March 3rd), and 24:00:00 as the next midnight.
	if p.i != len(p.s) || month < 1 || month > 12 || day < 1 || day > 31 ||
		hour > 24 || (hour == 24 && (minute|sec|nsec) != 0) || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, zone), true
}

type dateParser struct {
	s string
	i int
}

func (p *dateParser) digits(n int) (int, bool) {
	if p.i+n > len(p.s) {
		return 0, false
	}
	v := 0
	for _, c := range []byte(p.s[p.i : p.i+n]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	p.i += n
	return v, true
}

func (p *dateParser) run() string {
	j := p.i
	for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
		j++
	}
	r := p.s[p.i:j]
	p.i = j
	return r
}

func (p *dateParser) peek(c byte) bool { return p.i < len(p.s) && p.s[p.i] == c }

func (p *dateParser) eat(c byte) bool {
	if p.peek(c) {
		p.i++
		return true
	}
	return false
}

// localeDateTime renders like en-US Date.prototype.toLocaleString
// ("3/19/2026, 10:00:00 AM"), or "Invalid Date".
func localeDateTime(s string, loc *time.Location) string {
	if loc == nil {
		loc = time.Local
	}
	t, ok := parseJSDate(s, loc)
	if !ok {
		return "Invalid Date"
	}
	t = t.In(loc)
	return strconv.Itoa(int(t.Month())) + "/" + strconv.Itoa(t.Day()) + "/" + strconv.Itoa(t.Year()) + ", " + clock12(t)
}

// localeTime renders like en-US Date.prototype.toLocaleTimeString
// ("10:05:00 AM"), or "Invalid Date".
func localeTime(s string, loc *time.Location) string {
	if loc == nil {
		loc = time.Local
	}
	t, ok := parseJSDate(s, loc)
	if !ok {
		return "Invalid Date"
	}
	return clock12(t.In(loc))
}

// clock12 uses a plain space before AM/PM (Node 20's ICU), not U+202F.
func clock12(t time.Time) string {
	h := t.Hour() % 12
	if h == 0 {
		h = 12
	}
	ampm := "AM"
	if t.Hour() >= 12 {
		ampm = "PM"
	}
	return strconv.Itoa(h) + t.Format(":04:05 ") + ampm
}
