package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// decode reads the model's arguments into dst. Missing or null input is an
// empty object; the message names what was wrong without echoing the input.
func decode(input json.RawMessage, dst any) error {
	trimmed := bytes.TrimSpace(input)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		trimmed = []byte("{}")
	}
	if err := json.Unmarshal(trimmed, dst); err != nil {
		return fmt.Errorf("invalid arguments: %v", err)
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
