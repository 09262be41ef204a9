package frames

import (
	"bytes"
	"strings"
)

// Sanitise strips what could run in a browser from frame content, as the
// original does before storing (stored-XSS defence): script elements,
// event-handler attributes, javascript:/data:/vbscript: URLs in href/src
// and iframe/object/embed/form/input/textarea/button tags. Other text and
// Markdown are kept.
//
// It applies, in order, the original's four rules (written as regular
// expressions in the comments below) with hand-written scanners that take
// time linear in the input: the regular-expression version spent seconds
// on a 1 MiB body (one full rescan per removed script element, and Go's
// regexp engine is slow on long inputs). Its output is byte-for-byte the
// regular expressions' except that letters match ASCII case-insensitively
// only: the regexp's Unicode folding also read "ſ" (U+017F) as an "s",
// which no browser does.
func Sanitise(s string) string {
	s = stripScripts(s)
	s = stripEventAttrs(s)
	s = neuterURLs(s)
	return stripTags(s)
}

// isSpace is regexp's \s: [\t\n\f\r ].
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// isWord is regexp's \w: [0-9A-Za-z_].
func isWord(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// hasFoldPrefix reports whether s[i:] starts with the lower-case ASCII
// word lit, ignoring ASCII case.
func hasFoldPrefix(s string, i int, lit string) bool {
	if len(s)-i < len(lit) {
		return false
	}
	for j := 0; j < len(lit); j++ {
		c := s[i+j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lit[j] {
			return false
		}
	}
	return true
}

// skipSpace returns the first index at or after i that is not \s.
func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// nextByte finds the next c at or after i, remembering its last answer:
// the scanners ask with non-decreasing i, so a byte that never comes is
// looked for once, not once per attempt (which made the regexp version
// quadratic on many unclosed quotes or tags).
type nextByte struct {
	c        byte
	from, at int // at: the first c at or after from (-1: none)
	valid    bool
}

func (n *nextByte) find(s string, i int) int {
	if n.valid && i >= n.from && (n.at < 0 || n.at >= i) {
		return n.at
	}
	n.valid, n.from, n.at = true, i, strings.IndexByte(s[i:], n.c)
	if n.at >= 0 {
		n.at += i
	}
	return n.at
}

// scriptOpenAt reports whether cur (= a + b) holds (?i)<script\b at i.
func scriptOpenAt(a, b string, i int) bool {
	const lit = "<script"
	at := func(k int) byte {
		if k < len(a) {
			return a[k]
		}
		return b[k-len(a)]
	}
	n := len(a) + len(b)
	if n-i < len(lit) {
		return false
	}
	for j := 0; j < len(lit); j++ {
		c := at(i + j)
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lit[j] {
			return false
		}
	}
	// \b after the word character "t": end of text or a non-word byte.
	return i+len(lit) == n || !isWord(at(i+len(lit)))
}

// stripScripts removes each "<script…" up to and including the next
// "</script>", ASCII case-insensitively, always the leftmost in the text
// as it stands after the previous removal (so "<scr<script></script>ipt>"
// joins into a new one); an unclosed one stays, as the original's pattern
// does.
//
// The text is out + s[i:]: out is finished except its last 7 bytes, which
// a removal may join to what follows into a new "<script" (an opening tag
// is 7 bytes and its \b looks at one more), so each byte is scanned a
// bounded number of times.
func stripScripts(s string) string {
	if indexOpen(s, 0) < 0 {
		return s
	}
	var out bytes.Buffer
	out.Grow(len(s))
	closer := foldFinder("</script>")
	i := 0 // s[i:] is the rest
	for {
		o := out.Bytes()
		start := max(0, len(o)-7)
		tail := string(o[start:])
		found := -1 // position in out+rest
		for p := range len(tail) {
			if scriptOpenAt(tail, s[i:], p) {
				found = start + p
				break
			}
		}
		if found < 0 {
			lt := indexOpen(s, i)
			if lt < 0 {
				out.WriteString(s[i:])
				return out.String()
			}
			found = len(o) + lt - i
		}
		// The opening tag ends in the rest (it is 7 bytes long and starts
		// at most 7 bytes before the rest).
		openEnd := found + len("<script") - len(o) + i
		end := closer(s, openEnd)
		if end < 0 {
			out.WriteString(s[i:])
			return out.String()
		}
		if found < len(o) {
			out.Truncate(found)
		} else {
			out.WriteString(s[i : i+found-len(o)])
		}
		i = end + len("</script>")
	}
}

// indexOpen is the first (?i)<script\b in s at or after i, or -1.
func indexOpen(s string, i int) int {
	for {
		k := strings.IndexByte(s[i:], '<')
		if k < 0 {
			return -1
		}
		if scriptOpenAt("", s, i+k) {
			return i + k
		}
		i += k + 1
	}
}

// foldFinder returns a search for the lower-case ASCII lit (whose first
// byte is not a letter) in s at or after i, ignoring ASCII case (-1: none). It remembers a search that
// found nothing, so asking again from further on costs nothing.
func foldFinder(lit string) func(s string, i int) int {
	none := -1 // from here on there is no lit
	return func(s string, i int) int {
		if none >= 0 && i >= none {
			return -1
		}
		for k := i; k+len(lit) <= len(s); k++ {
			// lit starts with a non-letter: hop to its next occurrence.
			n := strings.IndexByte(s[k:], lit[0])
			if n < 0 {
				break
			}
			k += n
			if hasFoldPrefix(s, k, lit) {
				return k
			}
		}
		none = i
		return -1
	}
}

// stripEventAttrs removes every
// (?i)\s+on\w+\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+), leftmost first.
func stripEventAttrs(s string) string {
	var out strings.Builder
	dq, sq := nextByte{c: '"'}, nextByte{c: '\''}
	copied := 0 // s[:copied] is in out (or removed)
	i := 0
	for i < len(s) {
		if !isSpace(s[i]) {
			k := strings.IndexAny(s[i:], " \t\n\f\r")
			if k < 0 {
				break
			}
			i += k
		}
		// A run of \s starting at i: \s+ takes it whole, since "on"
		// must follow it.
		p := i
		q := skipSpace(s, i)
		end := eventAttrEnd(s, q, &dq, &sq)
		if end < 0 {
			i = q
			continue
		}
		if out.Cap() == 0 {
			out.Grow(len(s))
		}
		out.WriteString(s[copied:p])
		copied, i = end, end
	}
	if copied == 0 {
		return s
	}
	out.WriteString(s[copied:])
	return out.String()
}

// eventAttrEnd matches on\w+\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+) at q and
// returns its end, or -1.
func eventAttrEnd(s string, q int, dq, sq *nextByte) int {
	if !hasFoldPrefix(s, q, "on") {
		return -1
	}
	k := q + 2
	w := k
	for k < len(s) && isWord(s[k]) {
		k++
	}
	if k == w {
		return -1
	}
	k = skipSpace(s, k)
	if k >= len(s) || s[k] != '=' {
		return -1
	}
	k = skipSpace(s, k+1)
	if k >= len(s) {
		return -1
	}
	switch s[k] {
	case '"':
		if c := dq.find(s, k+1); c >= 0 {
			return c + 1
		}
	case '\'':
		if c := sq.find(s, k+1); c >= 0 {
			return c + 1
		}
	case '>':
		return -1
	}
	// [^\s>]+: at least s[k], which is neither.
	for k < len(s) && !isSpace(s[k]) && s[k] != '>' {
		k++
	}
	return k
}

// neuterURLs replaces every
// (?i)(href|src)\s*=\s*["']?\s*(?:javascript|data|vbscript)\s*: with the
// attribute name and `="`, leftmost first.
func neuterURLs(s string) string {
	var out strings.Builder
	copied := 0
	for i := 0; i < len(s); i++ {
		k := strings.IndexAny(s[i:], "hHsS")
		if k < 0 {
			break
		}
		i += k
		var name int
		switch s[i] {
		case 'h', 'H':
			if hasFoldPrefix(s, i, "href") {
				name = 4
			}
		case 's', 'S':
			if hasFoldPrefix(s, i, "src") {
				name = 3
			}
		}
		if name == 0 {
			continue
		}
		end := badURLEnd(s, i+name)
		if end < 0 {
			continue
		}
		if out.Cap() == 0 {
			out.Grow(len(s))
		}
		out.WriteString(s[copied : i+name])
		out.WriteString(`="`)
		copied = end
		i = end - 1
	}
	if copied == 0 {
		return s
	}
	out.WriteString(s[copied:])
	return out.String()
}

// badURLEnd matches \s*=\s*["']?\s*(?:javascript|data|vbscript)\s*: at k
// and returns its end, or -1.
func badURLEnd(s string, k int) int {
	k = skipSpace(s, k)
	if k >= len(s) || s[k] != '=' {
		return -1
	}
	k = skipSpace(s, k+1)
	if k < len(s) && (s[k] == '"' || s[k] == '\'') {
		k = skipSpace(s, k+1)
	}
	switch {
	case hasFoldPrefix(s, k, "javascript"):
		k += len("javascript")
	case hasFoldPrefix(s, k, "data"):
		k += len("data")
	case hasFoldPrefix(s, k, "vbscript"):
		k += len("vbscript")
	default:
		return -1
	}
	k = skipSpace(s, k)
	if k >= len(s) || s[k] != ':' {
		return -1
	}
	return k + 1
}

// badTags are the elements stripTags removes (their tags, not content).
var badTags = []string{"iframe", "object", "embed", "form", "input", "textarea", "button"}

// stripTags removes every
// (?i)<\s*/?\s*(?:iframe|object|embed|form|input|textarea|button)\b[^>]*>,
// leftmost first.
func stripTags(s string) string {
	var out strings.Builder
	gt := nextByte{c: '>'}
	copied := 0
	for i := 0; i < len(s); i++ {
		lt := strings.IndexByte(s[i:], '<')
		if lt < 0 {
			break
		}
		i += lt
		k := skipSpace(s, i+1)
		if k < len(s) && s[k] == '/' {
			k = skipSpace(s, k+1)
		}
		name := 0
		for _, t := range badTags {
			if hasFoldPrefix(s, k, t) {
				name = len(t)
				break
			}
		}
		if name == 0 {
			continue
		}
		k += name
		if k < len(s) && isWord(s[k]) {
			continue // \b
		}
		c := gt.find(s, k)
		if c < 0 {
			continue
		}
		if out.Cap() == 0 {
			out.Grow(len(s))
		}
		out.WriteString(s[copied:i])
		copied = c + 1
		i = c
	}
	if copied == 0 {
		return s
	}
	out.WriteString(s[copied:])
	return out.String()
}
