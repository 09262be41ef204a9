package chatstream

import "unicode/utf8"

// fastDelta reads the content delta of the chunk nearly every streamed
// token arrives in — one choice of index 0 whose delta holds at most a
// plain string content (no escapes), scalars beside it, no tool calls, no
// usage — without reflection. ok is false for anything else (and for
// anything json.Unmarshal would refuse or read differently: a key that
// matches a known one only by case, a repeated known key, malformed JSON);
// the caller then decodes the chunk with encoding/json. So the fast path
// changes what a chunk costs, never what it means (FuzzFastDelta).
func fastDelta(raw []byte) (content string, ok bool) {
	s := scan{b: raw}
	s.ws()
	if !s.objectKeys(func(key []byte) bool {
		if string(key) == "choices" {
			c, ok := s.choices()
			content = c
			return ok
		}
		if foldsTo(key, "choices") || foldsTo(key, "usage") {
			return false
		}
		if string(key) == "usage" {
			return s.literal("null")
		}
		return s.scalar()
	}, "choices") {
		return "", false
	}
	s.ws()
	return content, s.i == len(s.b)
}

// scan is a cursor over a chunk's JSON.
type scan struct {
	b []byte
	i int
}

func (s *scan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scan) byte(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// objectKeys reads an object, calling value for each key with the cursor
// on its value; value reads the value. once names the one key that must
// not repeat (json.Unmarshal keeps the last of repeated keys).
func (s *scan) objectKeys(value func(key []byte) bool, once string) bool {
	if !s.byte('{') {
		return false
	}
	if s.byte('}') {
		return true
	}
	seen := false
	for {
		s.ws()
		key, ok := s.str()
		if !ok || !s.byte(':') {
			return false
		}
		if string(key) == once {
			if seen {
				return false
			}
			seen = true
		}
		s.ws()
		if !value(key) {
			return false
		}
		if s.byte(',') {
			continue
		}
		return s.byte('}')
	}
}

// choices reads a choices array of exactly one choice of index 0 and
// returns its delta's content.
func (s *scan) choices() (content string, ok bool) {
	if !s.byte('[') {
		return "", false
	}
	s.ws()
	if !s.objectKeys(func(key []byte) bool {
		switch {
		case string(key) == "index":
			return s.literal("0")
		case string(key) == "delta":
			c, ok := s.delta()
			content = c
			return ok
		case foldsTo(key, "index") || foldsTo(key, "delta"):
			return false
		}
		return s.scalar()
	}, "delta") {
		return "", false
	}
	return content, s.byte(']')
}

// delta reads a delta object of scalars and returns its content.
func (s *scan) delta() (content string, ok bool) {
	ok = s.objectKeys(func(key []byte) bool {
		switch {
		case string(key) == "content":
			s.ws()
			if s.i < len(s.b) && s.b[s.i] == 'n' {
				return s.literal("null")
			}
			c, ok := s.str()
			if !ok || !utf8.Valid(c) {
				return false // json.Unmarshal replaces invalid UTF-8
			}
			content = string(c)
			return true
		case foldsTo(key, "content") || foldsTo(key, "tool_calls"):
			return false
		}
		return s.scalar()
	}, "content")
	return content, ok
}

// str reads a string without escapes and returns its bytes.
func (s *scan) str() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return s.b[start:j], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// scalar reads a string, number, true, false or null.
func (s *scan) scalar() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, ok := s.str()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

// literal reads exactly lit, which must not run on into a longer token.
func (s *scan) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	if s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c == '.', c == 'e', c == 'E', c == '-', c == '+':
			return false
		}
	}
	return true
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scan) number() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	s.i = i
	return true
}

// foldsTo reports whether key matches name the way json.Unmarshal matches
// field names (case-insensitively; Unicode folds such as 'ſ' for 's' and
// the Kelvin sign for 'k' included, by refusing any non-ASCII key of a
// plausible length) without being name itself.
func foldsTo(key []byte, name string) bool {
	if string(key) == name {
		return false
	}
	ascii := true
	for _, c := range key {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if !ascii {
		return len(key) <= 3*len(name) // a fold of name is at most 3 bytes a letter
	}
	if len(key) != len(name) {
		return false
	}
	for i := range len(key) {
		a, b := key[i]|0x20, name[i]|0x20
		if a != b || (key[i] != name[i] && (a < 'a' || a > 'z')) {
			return false
		}
	}
	return true
}
