package transcript

import (
	"bytes"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/waggle-os/core/libs/protocol"
)

// The fast paths below give exactly the results of the Parse-based
// functions while decoding only the lines that can matter. They rely on
// one fact about JSON text: without a \u escape, a string's raw bytes
// differ from its decoded text only at \" \\ \/ \b \f \n \r \t. So a line
// without `\u` whose raw bytes lack `"tool"` cannot be a tool event, and a
// query free of '"', '\\', '/' and control characters that occurs in a
// decoded string also occurs in the raw line.

var (
	toolMarker    = []byte(`"tool"`)
	unicodeEscape = []byte(`\u`)
)

// mayBeTool reports whether a raw line could be a tool-event line.
func mayBeTool(ln []byte) bool {
	return bytes.Contains(ln, toolMarker) || bytes.Contains(ln, unicodeEscape)
}

// eachLine calls fn for every non-blank line of data, as Parse splits them,
// until fn returns false.
func eachLine(data []byte, fn func(ln []byte) bool) {
	body := jsTrimBytes(data)
	for len(body) > 0 {
		var ln []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			ln, body = body[:i], body[i+1:]
		} else {
			ln, body = body, nil
		}
		if len(jsTrimBytes(ln)) == 0 {
			continue
		}
		if !fn(ln) {
			return
		}
	}
}

// QuickInfo is SessionInfo(id, Parse(data), mtime) without decoding every
// line: only the meta line, the first message line and lines that may be
// tool events are decoded.
func QuickInfo(id string, data []byte, mtime time.Time) protocol.SessionInfo {
	var f File
	first, titled := true, false
	eachLine(data, func(ln []byte) bool {
		if first {
			first = false
			li, w, _ := decodeLine(ln)
			if li.isMeta {
				f.metaRaw, f.meta, f.Meta = ln, li.meta, sessionMeta(w)
				return true
			}
			// Not a meta line: it is the first line of the body.
			if li.kind != lineTool {
				f.info = append(f.info, li)
				f.Count++
				titled = true
			}
			return true
		}
		if !titled || mayBeTool(ln) {
			li, _, _ := decodeLine(ln)
			if li.kind == lineTool {
				return true
			}
			if !titled {
				// derivedTitle looks at the first message line only.
				f.info = append(f.info, li)
				titled = true
			}
		}
		f.Count++
		return true
	})
	return SessionInfo(id, f, mtime)
}

// SearchData is Search(Parse(data), q) that decodes only the meta line,
// lines that may be tool events and lines whose raw bytes may contain q.
func SearchData(data []byte, q string) (matchCount int, snippets []Snippet) {
	if strings.ContainsFunc(q, func(r rune) bool { return r == '"' || r == '\\' || r == '/' || r < 0x20 }) {
		return Search(Parse(data), q)
	}
	lq := strings.ToLower(q)
	lqb := []byte(lq)
	var lowered []byte
	var h hits
	first := true
	seen := 0
	eachLine(data, func(ln []byte) bool {
		if first {
			first = false
			li, _, _ := decodeLine(ln)
			if li.isMeta {
				h.title(li.meta.title, lq)
				h.summary(li.meta.summary, lq)
				return true
			}
		}
		var hit bool
		lowered, hit = containsLower(lowered, ln, lqb)
		if !hit && !mayBeTool(ln) {
			seen++
			return seen < searchLines
		}
		li, _, _ := decodeLine(ln)
		if li.kind == lineTool {
			return true
		}
		seen++
		h.message(&li, lq)
		return seen < searchLines
	})
	return h.count, h.snippets
}

// containsLower reports whether the lower-cased ln contains lq, lowering
// ASCII lines into buf (reused) without allocating.
func containsLower(buf, ln, lq []byte) ([]byte, bool) {
	for _, c := range ln {
		if c >= utf8.RuneSelf {
			return buf, bytes.Contains(bytes.ToLower(ln), lq)
		}
	}
	buf = buf[:0]
	for _, c := range ln {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	return buf, bytes.Contains(buf, lq)
}
