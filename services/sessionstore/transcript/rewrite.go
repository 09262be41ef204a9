package transcript

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// WithSummary returns the file with its meta line's summary set to summary.
// A file without a meta line gets one prepended:
// {"type":"meta","title":<derived title or null>,"summary":…,"created":…},
// created being the first line's timestamp, else fallbackCreated. Every
// other non-blank line is kept byte for byte and in order; blank lines are
// dropped and the result ends with "\n".
func WithSummary(data []byte, summary string, fallbackCreated time.Time) []byte {
	f := Parse(data)
	if f.Meta != nil {
		return assemble(setKey(f.metaRaw, "summary", summary), f.Lines)
	}
	title := "null"
	if t, ok := f.derivedTitle(); ok {
		title = jsonString(t)
	}
	created := protocol.Timestamp(fallbackCreated)
	if len(f.info) > 0 && f.info[0].timestamp != "" {
		if _, ok := parseJSDate(f.info[0].timestamp, time.UTC); ok {
			created = f.info[0].timestamp
		}
	}
	meta := `{"type":"meta","title":` + title + `,"summary":` + jsonString(summary) + `,"created":` + jsonString(created) + `}`
	return assemble([]byte(meta), f.Lines)
}

// WithTitle returns the file renamed to title: the meta line's title is set,
// or, when the first line is not a meta line (or the file is empty), a meta
// line {"type":"meta","title":…,"created":<now>} is prepended. Other lines
// are kept as WithSummary keeps them.
func WithTitle(data []byte, title string, now time.Time) []byte {
	f := Parse(data)
	if f.Meta != nil {
		return assemble(setKey(f.metaRaw, "title", title), f.Lines)
	}
	meta := `{"type":"meta","title":` + jsonString(title) + `,"created":` + jsonString(protocol.Timestamp(now)) + `}`
	return assemble([]byte(meta), f.Lines)
}

func assemble(meta []byte, lines [][]byte) []byte {
	n := len(meta) + 1
	for _, l := range lines {
		n += len(l) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, meta...)
	out = append(out, '\n')
	for _, l := range lines {
		out = append(out, l...)
		out = append(out, '\n')
	}
	return out
}

// setKey re-serialises the JSON object obj with key set to the string value,
// keeping the other keys in their order (a new key goes last), as
// `obj[key] = value; JSON.stringify(obj)` does. obj must be a valid object.
func setKey(obj []byte, key, value string) []byte {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil { // '{'
		return obj
	}
	type member struct {
		key string
		val string
	}
	var members []member
	index := make(map[string]int)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return obj
		}
		k, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return obj
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return obj
		}
		// A repeated key keeps its first position and its last value, as
		// JSON.parse does.
		if i, ok := index[k]; ok {
			members[i].val = buf.String()
			continue
		}
		index[k] = len(members)
		members = append(members, member{k, buf.String()})
	}
	if i, ok := index[key]; ok {
		members[i].val = jsonString(value)
	} else {
		members = append(members, member{key, jsonString(value)})
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonString(m.key))
		b.WriteByte(':')
		b.WriteString(m.val)
	}
	b.WriteByte('}')
	return []byte(b.String())
}
