package transcript

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// emptyExport is the export of a file with nothing but whitespace.
const emptyExport = "# Session\n\n*Empty session*\n"

// ExportMarkdown renders session id as Markdown: a "# title" heading, the
// created date and summary from meta lines (any meta line, later ones win),
// then each message (non-empty role and content) under "### **You**" or
// "### **Assistant**" with its time. Dates are rendered like en-US
// toLocaleString / toLocaleTimeString in loc (nil: the local zone).
// Without a meta title the title is the first user message's first line
// (cut to 80 units), else the id.
func ExportMarkdown(id string, f File, loc *time.Location) string {
	if f.Meta == nil && len(f.Lines) == 0 {
		return emptyExport
	}
	var title any = id
	created, summary := "", ""
	applyMeta := func(m metaFields) {
		if m.title != nil {
			title = m.title
		}
		if m.created != "" {
			created = m.created
		}
		if m.summary != "" {
			summary = m.summary
		}
	}
	if f.Meta != nil {
		applyMeta(f.meta)
	}
	var msgs []*lineInfo
	for i := range f.info {
		l := &f.info[i]
		switch {
		case l.isMeta:
			applyMeta(l.meta)
		case l.isMessage():
			msgs = append(msgs, l)
		}
	}
	if t, ok := title.(string); ok && t == id {
		for _, m := range msgs {
			if m.role == "user" {
				first, _, _ := strings.Cut(m.content, "\n")
				title = truncateEllipsis(jsTrim(first), 80, 77)
				break
			}
		}
	}

	parts := []string{"# " + titleText(title)}
	if created != "" {
		parts = append(parts, "\n*"+localeDateTime(created, loc)+"*")
	}
	if summary != "" {
		parts = append(parts, "\n> "+summary)
	}
	parts = append(parts, "")
	for _, m := range msgs {
		label := "**Assistant**"
		if m.role == "user" {
			label = "**You**"
		}
		at := ""
		if m.timestamp != "" {
			at = " *(" + localeTime(m.timestamp, loc) + ")*"
		}
		parts = append(parts, "### "+label+at+"\n", m.content, "")
	}
	return strings.Join(parts, "\n")
}

// titleText renders a title value as JavaScript's String(v) would inside a
// template literal.
func titleText(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case json.RawMessage:
		return rawJSString(t)
	}
	return ""
}

func rawJSString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	case '{':
		return "[object Object]"
	case '[':
		var items []json.RawMessage
		_ = json.Unmarshal(raw, &items)
		out := make([]string, len(items))
		for i, it := range items {
			if s := string(bytes.TrimSpace(it)); s != "null" {
				out[i] = rawJSString(it)
			}
		}
		return strings.Join(out, ",")
	case 't', 'f', 'n':
		return string(raw)
	}
	if v, err := strconv.ParseFloat(string(raw), 64); err == nil {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return string(raw)
}
