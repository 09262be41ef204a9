// Package jsonpos turns a JSON decoding error into one a person can act
// on: the line and column of the byte where decoding stopped, as editors
// count them.
package jsonpos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Annotate returns err prefixed with "line L, column C: " when it is a
// syntax or type error of decoding data; other errors are returned as is.
func Annotate(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var offset int64
	switch {
	case errors.As(err, &syn):
		offset = syn.Offset
	case errors.As(err, &typ):
		offset = typ.Offset
	default:
		return err
	}
	line, col := Position(data, offset)
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}

// Position is the 1-based line and column (in characters) of byte offset
// in data. encoding/json reports the offset just past the byte that failed,
// so the column names that byte.
func Position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	if offset > 0 {
		offset-- // the offending byte, not the one after it
	}
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	col = utf8.RuneCount(before[lineStart:]) + 1
	return line, col
}

// Check decodes data as a JSON object and annotates what is wrong with it.
func Check(data []byte) error {
	var v map[string]json.RawMessage
	if err := json.Unmarshal(data, &v); err != nil {
		return Annotate(data, err)
	}
	return nil
}
