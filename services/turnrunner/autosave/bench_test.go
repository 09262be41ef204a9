package autosave

import (
	"strings"
	"testing"
)

// longReply is a 5,000-token reply of plain prose in short lines, with no
// phrase any rule looks for: the common case, where every rule reads the
// whole reply and finds nothing.
var longReply = strings.Repeat("The migration moves each table to the new cluster and checks the rows.\n", 400)

// BenchmarkExtractLongReply is Extract at the end of a long turn (it runs
// on the turn's goroutine before done).
func BenchmarkExtractLongReply(b *testing.B) {
	b.SetBytes(int64(len(longReply)))
	for b.Loop() {
		Extract("How does the migration of the orders database work?", longReply)
	}
}
