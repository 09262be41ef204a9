package protocol

import (
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// The contract counts text as JavaScript does: message limits, previews and
// titles are measured in UTF-16 code units (String.prototype.length), and
// every timestamp on the wire is Date.prototype.toISOString. These helpers
// are the one place that knows it.

// TimestampLayout is the wire timestamp layout (toISOString: UTC, always
// milliseconds). Strings in it sort lexically in time order.
const TimestampLayout = "2006-01-02T15:04:05.000Z"

// Timestamp formats t in TimestampLayout, converting it to UTC first.
func Timestamp(t time.Time) string { return t.UTC().Format(TimestampLayout) }

// Stamps hands out Timestamps that strictly increase: one taken within
// the millisecond of the previous one is moved a millisecond past it, so
// records sorted by their stamp (newest first, creation order) keep the
// order they were made in. The zero value is ready; it is safe for
// concurrent use.
type Stamps struct {
	mu   sync.Mutex
	last time.Time
}

// Next is the stamp for a record made at now.
func (s *Stamps) Next(now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := now.UTC().Truncate(time.Millisecond)
	if !t.After(s.last) {
		t = s.last.Add(time.Millisecond)
	}
	s.last = t
	return Timestamp(t)
}

// UTF16Len is the length of s in UTF-16 code units, as JavaScript's
// String.prototype.length counts it.
func UTF16Len(s string) int {
	if isASCII(s) {
		return len(s)
	}
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// SliceUTF16 is JavaScript's s.slice(start, end) with indices in UTF-16
// code units, clamped to the string. A cut through a surrogate pair leaves
// U+FFFD, where JavaScript would leave a lone surrogate (Go strings cannot
// hold one).
func SliceUTF16(s string, start, end int) string {
	if isASCII(s) {
		start, end = clampRange(start, end, len(s))
		return s[start:end]
	}
	u := utf16.Encode([]rune(s))
	start, end = clampRange(start, end, len(u))
	return string(utf16.Decode(u[start:end]))
}

// TruncateUTF16 keeps the first n UTF-16 code units of s; s itself when it
// is no longer than that.
func TruncateUTF16(s string, n int) string {
	if UTF16Len(s) <= n {
		return s
	}
	return SliceUTF16(s, 0, n)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func clampRange(start, end, n int) (int, int) {
	start = min(max(start, 0), n)
	end = min(max(end, 0), n)
	if end < start {
		end = start
	}
	return start, end
}
