package turnevents

import (
	"bytes"
	"encoding/json"
)

// encode marshals event data as single-line JSON without HTML escaping
// (clients compare text byte for byte; "<" must stay "<"). Raw JSON is
// passed through.
func encode(data any) ([]byte, error) {
	if raw, ok := data.(json.RawMessage); ok {
		return raw, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(data); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil // Encode appends '\n'
}

// tokenBody is the data of a token event with text as content, built by
// hand: a token is the hot path, and reflection-based JSON per token
// costs more than the rest of its publish.
func tokenBody(text []byte) []byte {
	b := make([]byte, 0, len(text)+16)
	b = append(b, `{"content":`...)
	b = appendJSONString(b, text)
	return append(b, '}')
}

// tokenBodyString is tokenBody for a string, without copying it first.
func tokenBodyString(text string) []byte {
	b := make([]byte, 0, len(text)+16)
	b = append(b, `{"content":`...)
	b = appendJSONString(b, text)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string without HTML escaping.
func appendJSONString[S ~string | ~[]byte](b []byte, s S) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
