package transcript

import (
	"strings"

	"github.com/waggle-os/core/libs/protocol"
)

// Snippet is one search hit's context; Role is the message role, or
// "summary" for a hit in the session summary.
type Snippet struct {
	Text string `json:"text"`
	Role string `json:"role"`
}

// maxSnippets caps the snippets of one session; matchCount keeps counting.
const maxSnippets = 3

// searchLines is how many message lines of a session are searched.
const searchLines = 50

// Search matches q case-insensitively as a substring of the session's title
// (a string title: one a user or the auto-titler gave it), the meta summary
// and the contents of the first 50 message lines — the original ignored
// titles, so a session renamed "Tax return" was not found by "tax".
// Each hit adds one to matchCount; the first three hits give snippets. The
// caller enforces the 2-character minimum on q.
func Search(f File, q string) (matchCount int, snippets []Snippet) {
	lq := strings.ToLower(q)
	var h hits
	if f.Meta != nil {
		h.title(f.meta.title, lq)
		h.summary(f.meta.summary, lq)
	}
	seen := 0
	f.messageLines(func(l *lineInfo) bool {
		seen++
		h.message(l, lq)
		return seen < searchLines
	})
	return h.count, h.snippets
}

// hits collects one session's search hits: every hit counts, the first
// maxSnippets give snippets (a summary hit, the first, always does).
type hits struct {
	count    int
	snippets []Snippet
}

// title looks for lq in the meta line's title (only a string title: the
// raw JSON of another value is not text a user named it by).
func (h *hits) title(t any, lq string) {
	if s, ok := t.(string); ok && s != "" && strings.Contains(strings.ToLower(s), lq) {
		h.count++
		h.snippets = append(h.snippets, Snippet{Text: snippet(s, lq), Role: "title"})
	}
}

// summary looks for lq in the meta line's summary s.
func (h *hits) summary(s, lq string) {
	if s != "" && strings.Contains(strings.ToLower(s), lq) {
		h.count++
		h.snippets = append(h.snippets, Snippet{Text: snippet(s, lq), Role: "summary"})
	}
}

// message looks for lq in a message line's content.
func (h *hits) message(l *lineInfo, lq string) {
	if l.isMessage() && strings.Contains(strings.ToLower(l.content), lq) {
		h.count++
		if len(h.snippets) < maxSnippets {
			h.snippets = append(h.snippets, Snippet{Text: snippet(l.content, lq), Role: l.role})
		}
	}
}

// snippet is the text from 40 units before the first hit to 80 units after
// it, newlines flattened, with "..." marking each cut side.
func snippet(text, lq string) string {
	lower := strings.ToLower(text)
	at := strings.Index(lower, lq)
	if at < 0 {
		return protocol.SliceUTF16(text, 0, 120)
	}
	// Go's ToLower maps rune to rune within the same UTF-16 width, so an
	// offset in the lowered text is an offset in the original.
	idx := protocol.UTF16Len(lower[:at])
	n := protocol.UTF16Len(text)
	start := max(0, idx-40)
	end := min(n, idx+protocol.UTF16Len(lq)+80)
	s := strings.ReplaceAll(protocol.SliceUTF16(text, start, end), "\n", " ")
	if start > 0 {
		s = "..." + s
	}
	if end < n {
		s += "..."
	}
	return s
}

// SnippetText is the snippet Search gives for a hit of q in text: 40 UTF-16
// units before the first case-insensitive occurrence to 80 after it. Stores
// that count matches themselves build their snippets with it.
func SnippetText(text, q string) string { return snippet(text, strings.ToLower(q)) }

// MaxSnippets is how many snippets one search result carries at most.
const MaxSnippets = maxSnippets

// SearchedLines is how many message lines of a session a search looks at.
const SearchedLines = searchLines
