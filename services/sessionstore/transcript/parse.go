package transcript

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/waggle-os/core/libs/protocol"
)

// File is a parsed session file. Lines (and the raw meta line) alias the
// bytes given to Parse; do not modify those bytes while the File is in use.
type File struct {
	// Meta is the meta line (the first non-blank line when it is a JSON
	// object with "type":"meta"), or nil.
	Meta *protocol.SessionMeta
	// Messages are the lines with a non-empty string role and a string
	// content (an empty content is kept), in file order.
	Messages []protocol.Message
	// Tools are the decodable `"type":"tool"` lines, in file order.
	Tools []protocol.ToolEvent
	// Count is the session's messageCount: the non-blank lines after the
	// meta line that are not tool events. Malformed lines count, as they did
	// in the original, so a torn line still shows up in the listing.
	Count int
	// Lines are the non-blank lines after the meta line, raw and in order:
	// messages, tool events and malformed lines alike.
	Lines [][]byte
	// Malformed counts the lines that are not JSON at all (garbage, or a
	// line torn by a crash): kept in Lines, byte for byte, but yielding
	// nothing.
	Malformed int

	metaRaw []byte
	meta    metaFields
	info    []lineInfo // parallel to Lines
}

// metaFields are the meta values the algorithms read, kept with JavaScript
// truthiness: an empty string is "unset".
type metaFields struct {
	title    any // non-empty string, or the raw JSON of a truthy non-string
	summary  string
	created  string
	branchOf *protocol.SessionBranch
}

type lineKind uint8

const (
	lineMalformed lineKind = iota // not JSON
	lineValue                     // JSON, but a tool event it is not
	lineTool                      // "type":"tool"
)

// lineInfo is what one line says, decoded once. Only string-typed fields are
// taken: a number where the original expects a string is treated as absent.
type lineInfo struct {
	kind         lineKind
	isMeta       bool // a "type":"meta" line after line 0
	role         string
	content      string
	hasContent   bool
	timestamp    string
	hasTimestamp bool
	meta         metaFields // when isMeta
}

// isMessage reports a line the original code accepts as a message
// (`parsed.role && parsed.content`): both non-empty strings.
func (l *lineInfo) isMessage() bool {
	return l.kind == lineValue && !l.isMeta && l.role != "" && l.content != ""
}

// Parse reads a session file. It never fails: blank lines are skipped and
// malformed or torn lines are kept raw in Lines (and counted) but yield no
// message or tool event.
func Parse(data []byte) File {
	var f File
	first := true
	eachLine(data, func(ln []byte) bool {
		li, w, whole := decodeLine(ln)
		if first {
			first = false
			if li.isMeta {
				f.metaRaw = ln
				f.meta = li.meta
				f.Meta = sessionMeta(w)
				return true
			}
		}
		f.Lines = append(f.Lines, ln)
		f.info = append(f.info, li)
		if li.kind == lineMalformed {
			f.Malformed++
		}
		switch {
		case li.kind == lineTool:
			if whole {
				f.Tools = append(f.Tools, w.toolEvent())
			}
			return true
		case li.kind == lineValue && !li.isMeta && li.role != "" && li.hasContent:
			f.Messages = append(f.Messages, protocol.Message{
				Role:      li.role,
				Content:   li.content,
				Timestamp: li.timestamp,
				TurnID:    w.TurnID,
				Error:     w.Error,
			})
		}
		f.Count++
		return true
	})
	return f
}

// wireLine is every field any line kind carries, decoded in one pass.
type wireLine struct {
	Type       string          `json:"type"`
	Role       string          `json:"role"`
	Content    *string         `json:"content"`
	Timestamp  *string         `json:"timestamp"`
	TurnID     string          `json:"turnId"`
	Error      string          `json:"error"`
	Title      json.RawMessage `json:"title"`
	Summary    string          `json:"summary"`
	Created    string          `json:"created"`
	Distilled  json.RawMessage `json:"distilled"`
	Outcome    json.RawMessage `json:"outcome"`
	BranchOf   json.RawMessage `json:"branchOf"`
	CallID     string          `json:"callId"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	Result     string          `json:"result"`
	IsError    bool            `json:"isError"`
	Status     string          `json:"status"`
	DurationMs *int64          `json:"durationMs"`
	Parent     string          `json:"parent"`
}

// decodeLine classifies one line and decodes what it carries. A line whose
// fields have unexpected types (a numeric content, say) is decoded field by
// field instead, keeping the fields that are usable, as the original's
// duck-typed reads did. A tool line that does not decode as a tool event is
// still a tool line (never a message, never counted) but yields no event.
//
// encoding/json matches keys case-insensitively; files are written by the
// store with exact keys, so that looseness is accepted for speed.
func decodeLine(ln []byte) (lineInfo, *wireLine, bool) {
	w := new(wireLine)
	if err := json.Unmarshal(ln, w); err == nil {
		return lineFromWire(w), w, true
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(ln, &m); err != nil {
		var v any
		if json.Unmarshal(ln, &v) == nil {
			return lineInfo{kind: lineValue}, nil, false
		}
		return lineInfo{kind: lineMalformed}, nil, false
	}
	// Retry with only the string-typed fields that really are strings.
	w = &wireLine{
		Type:    stringField(m, "type"),
		Role:    stringField(m, "role"),
		TurnID:  stringField(m, "turnId"),
		Error:   stringField(m, "error"),
		Title:   m["title"],
		Summary: stringField(m, "summary"),
		Created: stringField(m, "created"),
	}
	if s, ok := stringFieldOK(m, "content"); ok {
		w.Content = &s
	}
	if s, ok := stringFieldOK(m, "timestamp"); ok {
		w.Timestamp = &s
	}
	if raw, ok := m["distilled"]; ok {
		w.Distilled = raw
	}
	if raw, ok := m["outcome"]; ok {
		w.Outcome = raw
	}
	w.BranchOf = m["branchOf"]
	// A tool line with mistyped fields is no usable event.
	return lineFromWire(w), w, false
}

func lineFromWire(w *wireLine) lineInfo {
	li := lineInfo{kind: lineValue}
	switch w.Type {
	case "tool":
		li.kind = lineTool
		return li
	case "meta":
		li.isMeta = true
		li.meta = metaFields{
			title:    truthyValue(w.Title),
			summary:  w.Summary,
			created:  w.Created,
			branchOf: branchOf(w.BranchOf),
		}
	}
	li.role = w.Role
	if w.Content != nil {
		li.content, li.hasContent = *w.Content, true
	}
	if w.Timestamp != nil {
		li.timestamp, li.hasTimestamp = *w.Timestamp, true
	}
	return li
}

func (w *wireLine) toolEvent() protocol.ToolEvent {
	ts := ""
	if w.Timestamp != nil {
		ts = *w.Timestamp
	}
	return protocol.ToolEvent{
		TurnID: w.TurnID, CallID: w.CallID, Name: w.Name, Input: w.Input,
		Result: w.Result, IsError: w.IsError, Status: w.Status,
		DurationMs: w.DurationMs, Parent: w.Parent, Timestamp: ts,
	}
}

func stringField(m map[string]json.RawMessage, key string) string {
	s, _ := stringFieldOK(m, key)
	return s
}

func stringFieldOK(m map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := m[key]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// truthyValue returns a JSON value when JavaScript would find it truthy: a
// non-empty string as a string, any other truthy value as its raw JSON.
func truthyValue(raw json.RawMessage) any {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil || s == "" {
			return nil
		}
		return s
	case 'n', 'f':
		return nil
	case 't', '{', '[':
		return raw
	}
	if v, err := strconv.ParseFloat(string(raw), 64); err == nil && v == 0 {
		return nil
	}
	return raw
}

func sessionMeta(w *wireLine) *protocol.SessionMeta {
	meta := &protocol.SessionMeta{Type: "meta", Created: w.Created, Distilled: truthyValue(w.Distilled) != nil}
	var title string
	if len(w.Title) > 0 && w.Title[0] == '"' && json.Unmarshal(w.Title, &title) == nil {
		meta.Title = &title
	}
	if w.Summary != "" {
		s := w.Summary
		meta.Summary = &s
	}
	if len(w.Outcome) > 0 && string(w.Outcome) != "null" {
		meta.Outcome = w.Outcome
	}
	meta.BranchOf = branchOf(w.BranchOf)
	return meta
}

// branchOf reads a meta line's branchOf; anything but an object naming a
// valid session id and a message index is no branch.
func branchOf(raw json.RawMessage) *protocol.SessionBranch {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var b protocol.SessionBranch
	if json.Unmarshal(raw, &b) != nil || !protocol.ValidID(b.Session) || b.At < 0 {
		return nil
	}
	return &b
}

// messageLines calls fn for each line the original treated as a message line
// (every non-blank line after the meta line, tool events aside), stopping
// when fn returns false.
func (f *File) messageLines(fn func(*lineInfo) bool) {
	for i := range f.info {
		if f.info[i].kind == lineTool {
			continue
		}
		if !fn(&f.info[i]) {
			return
		}
	}
}
