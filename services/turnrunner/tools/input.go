package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// decode reads the model's arguments into dst, a pointer to the tool's input
// struct, strictly: the arguments must be one JSON object whose keys are
// exactly (case included) the json names of dst's fields, each at most
// once, with values of the fields' types. Missing or null input is an
// empty object. Errors read well after "invalid arguments: ".
//
// encoding/json alone matches keys case-insensitively and lets the last of
// duplicate keys win, so {"path":"a","Path":"b"} would show "a" to anyone
// reading the first key and write "b"; here both are errors. The message
// names what was wrong without echoing the values.
func decode(input json.RawMessage, dst any) error {
	trimmed := bytes.TrimSpace(input)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		trimmed = []byte("{}")
	}
	if !json.Valid(trimmed) {
		var probe any
		return json.Unmarshal(trimmed, &probe) // its syntax error says where
	}
	if err := checkKeys(trimmed, fieldNames(reflect.TypeOf(dst).Elem())); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	return dec.Decode(dst)
}

// fieldNames lists the json names of struct type t's fields, in order.
func fieldNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// maxKeyShown bounds how much of an offending key an error message repeats.
const maxKeyShown = 40

// checkKeys walks the JSON text data and fails unless it is a single
// object whose keys are all in allowed, with no key twice in it or in any
// object nested in its values.
func checkKeys(data []byte, allowed []string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return errors.New("not valid JSON")
	}
	if tok != json.Delim('{') {
		return errors.New("arguments must be a JSON object")
	}
	err = walkObject(dec, func(key string) error {
		if !slices.Contains(allowed, key) {
			return fmt.Errorf("unknown key %q (the keys are: %s; names are case-sensitive)",
				truncateUTF8(key, maxKeyShown), strings.Join(allowed, ", "))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the arguments object")
	}
	return nil
}

// walkObject reads the members of an object whose '{' was just read, up to
// and including its '}', checking each key with check and every nested
// value for duplicate keys.
func walkObject(dec *json.Decoder, check func(key string) error) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return errors.New("not valid JSON")
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("duplicate key %q", truncateUTF8(key, maxKeyShown))
		}
		seen[key] = true
		if check != nil {
			if err := check(key); err != nil {
				return err
			}
		}
		if err := walkValue(dec); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return errors.New("not valid JSON")
	}
	return nil
}

// walkValue reads one value, checking nested objects for duplicate keys.
func walkValue(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return errors.New("not valid JSON")
	}
	switch tok {
	case json.Delim('{'):
		return walkObject(dec, nil)
	case json.Delim('['):
		for dec.More() {
			if err := walkValue(dec); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // the closing ']'
			return errors.New("not valid JSON")
		}
	}
	return nil
}

// intArg accepts a JSON number or a numeric string: models are not always
// careful with types, and "20" clearly means 20.
type intArg int

// UnmarshalJSON implements json.Unmarshaler.
func (a *intArg) UnmarshalJSON(b []byte) error {
	f, err := numberArg(b)
	if err != nil {
		return err
	}
	if f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return fmt.Errorf("%s is not a whole number", b)
	}
	*a = intArg(f)
	return nil
}

// floatArg accepts a JSON number or a numeric string.
type floatArg float64

// UnmarshalJSON implements json.Unmarshaler.
func (a *floatArg) UnmarshalJSON(b []byte) error {
	f, err := numberArg(b)
	if err != nil {
		return err
	}
	*a = floatArg(f)
	return nil
}

func numberArg(b []byte) (float64, error) {
	s := strings.TrimSpace(string(b))
	if unq, err := strconv.Unquote(s); err == nil {
		s = strings.TrimSpace(unq)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s is not a number", b)
	}
	return f, nil
}

// boolArg accepts a JSON boolean or the strings "true"/"false".
type boolArg bool

// UnmarshalJSON implements json.Unmarshaler.
func (a *boolArg) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if unq, err := strconv.Unquote(s); err == nil {
		s = strings.TrimSpace(unq)
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%s is not a boolean", b)
	}
	*a = boolArg(v)
	return nil
}

// tagsArg accepts a list of strings or a single comma-separated string.
type tagsArg []string

// UnmarshalJSON implements json.Unmarshaler.
func (a *tagsArg) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		var one string
		if err2 := json.Unmarshal(b, &one); err2 != nil {
			return fmt.Errorf("tags must be a list of strings")
		}
		list = strings.Split(one, ",")
	}
	out := (*a)[:0]
	for _, t := range list {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	*a = out
	return nil
}
