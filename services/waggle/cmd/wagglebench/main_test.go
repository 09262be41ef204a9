package main

import (
	"strings"
	"testing"
)

// TestSpliceSectionKeepsTheRest: -write-docs replaces only the suite's own
// section and keeps everything else of docs/benchmarks.md (the echo
// section above it, anything written below it).
func TestSpliceSectionKeepsTheRest(t *testing.T) {
	section := beginMarker + "\nNEW\n" + endMarker + "\n"
	tests := []struct {
		name, doc, want string
	}{
		{"appended when absent", "# Benchmarks\n\n## Echo\n\nold table\n",
			"# Benchmarks\n\n## Echo\n\nold table\n\n" + section},
		{"replaced in place", "# B\n\n" + beginMarker + "\nOLD\n" + endMarker + "\n\n## Later\n",
			"# B\n\n" + section + "\n## Later\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := spliceSection(tt.doc, section)
			if got != tt.want {
				t.Fatalf("got\n%q\nwant\n%q", got, tt.want)
			}
			if strings.Count(got, beginMarker) != 1 {
				t.Fatal("section duplicated")
			}
		})
	}
}
