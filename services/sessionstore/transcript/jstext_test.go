package transcript

import (
	"testing"
	"time"
)

func TestJSONStringMatchesJSONStringify(t *testing.T) {
	tests := map[string]string{
		`plain`:          `"plain"`,
		`a"b\c`:          `"a\"b\\c"`,
		"line\nnext\tx":  `"line\nnext\tx"`,
		"<b>&</b>":       `"<b>&</b>"`,
		"\x01":           `"\u0001"`,
		"\u2028 ünïcode": "\"\u2028 ünïcode\"",
	}
	for in, want := range tests {
		if got := jsonString(in); got != want {
			t.Errorf("jsonString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestLocaleDates(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no tzdata: %v", err)
	}
	tests := []struct {
		in       string
		loc      *time.Location
		dateTime string
		clock    string
	}{
		{"2026-03-19T10:00:00.000Z", time.UTC, "3/19/2026, 10:00:00 AM", "10:00:00 AM"},
		{"2026-03-19T00:05:09Z", time.UTC, "3/19/2026, 12:05:09 AM", "12:05:09 AM"},
		{"2026-03-19T12:00:00Z", time.UTC, "3/19/2026, 12:00:00 PM", "12:00:00 PM"},
		{"2026-12-01T23:59:59.999Z", time.UTC, "12/1/2026, 11:59:59 PM", "11:59:59 PM"},
		{"2026-03-19T10:00:00Z", ny, "3/19/2026, 6:00:00 AM", "6:00:00 AM"},
		{"2026-03-19T10:00:00+02:00", time.UTC, "3/19/2026, 8:00:00 AM", "8:00:00 AM"},
		// No offset on a date-time: local time, as in JavaScript.
		{"2026-03-19T10:00:00", ny, "3/19/2026, 10:00:00 AM", "10:00:00 AM"},
		// A date alone is UTC midnight.
		{"2026-03-19", ny, "3/18/2026, 8:00:00 PM", "8:00:00 PM"},
		{"yesterday", time.UTC, "Invalid Date", "Invalid Date"},
		{"2026-13-01T00:00:00Z", time.UTC, "Invalid Date", "Invalid Date"},
		{"2026-02-32T00:00:00Z", time.UTC, "Invalid Date", "Invalid Date"},
		{" 2026-03-19T10:00:00Z", time.UTC, "Invalid Date", "Invalid Date"},
		// Day overflow and 24:00 behave as in V8.
		{"2026-02-31T00:00:00Z", time.UTC, "3/3/2026, 12:00:00 AM", "12:00:00 AM"},
		{"2026-03-19T24:00:00Z", time.UTC, "3/20/2026, 12:00:00 AM", "12:00:00 AM"},
		{"2026-03-19t10:00z", time.UTC, "3/19/2026, 10:00:00 AM", "10:00:00 AM"},
		{"2026-03-19T10:00:00.123456+0200", time.UTC, "3/19/2026, 8:00:00 AM", "8:00:00 AM"},
		{"2026-03", time.UTC, "3/1/2026, 12:00:00 AM", "12:00:00 AM"},
	}
	for _, tt := range tests {
		if got := localeDateTime(tt.in, tt.loc); got != tt.dateTime {
			t.Errorf("localeDateTime(%q) = %q, want %q", tt.in, got, tt.dateTime)
		}
		if got := localeTime(tt.in, tt.loc); got != tt.clock {
			t.Errorf("localeTime(%q) = %q, want %q", tt.in, got, tt.clock)
		}
	}
}
