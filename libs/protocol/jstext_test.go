package protocol

import (
	"testing"
	"time"
)

func TestUTF16(t *testing.T) {
	tests := []struct {
		s          string
		len        int
		start, end int
		slice      string
		trunc      string // TruncateUTF16(s, end)
	}{
		{"", 0, 0, 0, "", ""},
		{"hello", 5, 1, 3, "el", "hel"},
		{"héllo", 5, 0, 2, "hé", "hé"},
		{"a😀b", 4, 0, 3, "a😀", "a😀"},
		{"a😀b", 4, 3, 4, "b", "a😀b"},
		{"a😀b", 4, 0, 2, "a\uFFFD", "a\uFFFD"}, // cut inside the pair
		{"日本語", 3, 1, 2, "本", "日本"},
		{"abc", 3, -1, 10, "abc", "abc"},
		{"abc", 3, 2, 1, "", "a"},
		{"😀😀", 4, 2, 4, "😀", "😀😀"},
	}
	for _, tt := range tests {
		if got := UTF16Len(tt.s); got != tt.len {
			t.Errorf("UTF16Len(%q) = %d, want %d", tt.s, got, tt.len)
		}
		if got := SliceUTF16(tt.s, tt.start, tt.end); got != tt.slice {
			t.Errorf("SliceUTF16(%q,%d,%d) = %q, want %q", tt.s, tt.start, tt.end, got, tt.slice)
		}
		if got := TruncateUTF16(tt.s, tt.end); got != tt.trunc {
			t.Errorf("TruncateUTF16(%q,%d) = %q, want %q", tt.s, tt.end, got, tt.trunc)
		}
	}
}

func TestTimestamp(t *testing.T) {
	tests := []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 3, 19, 10, 0, 0, 0, time.UTC), "2026-03-19T10:00:00.000Z"},
		{time.Date(2026, 3, 19, 10, 0, 0, 123456789, time.UTC), "2026-03-19T10:00:00.123Z"},
		{time.Date(2026, 3, 19, 12, 30, 5, 0, time.FixedZone("", 2*3600)), "2026-03-19T10:30:05.000Z"},
		{time.Time{}, "0001-01-01T00:00:00.000Z"},
	}
	for _, tt := range tests {
		if got := Timestamp(tt.t); got != tt.want {
			t.Errorf("Timestamp(%v) = %q, want %q", tt.t, got, tt.want)
		}
	}
}

func TestStampsIncrease(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var s Stamps
	for _, tc := range []struct {
		now  time.Time
		want string
	}{
		{at.Add(400 * time.Microsecond), "2026-05-01T12:00:00.000Z"},
		{at.Add(900 * time.Microsecond), "2026-05-01T12:00:00.001Z"}, // same millisecond: moved past
		{at, "2026-05-01T12:00:00.002Z"},                             // a clock stepped back
		{at.Add(time.Second), "2026-05-01T12:00:01.000Z"},            // later: as is
		{at.Add(time.Second).In(time.FixedZone("x", 3600)), "2026-05-01T12:00:01.001Z"},
	} {
		if got := s.Next(tc.now); got != tc.want {
			t.Errorf("Next(%v) = %s, want %s", tc.now, got, tc.want)
		}
	}
}
