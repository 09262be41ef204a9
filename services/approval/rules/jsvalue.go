package rules

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// Tool arguments arrive as decoded JSON and the original read them with
// JavaScript's String(), ?? and truthiness. These helpers give a value the
// reading the original gave it, so a number where a string was expected is
// judged the same way.

// argString reads args[key] as String(args[key] ?? "") did: absent and
// null read as the empty string.
func argString(args map[string]any, key string) string {
	return jsString(args[key])
}

// jsString renders v like JavaScript's String(v) for the values JSON can
// produce; nil reads as the empty string, as it did after the original's
// nullish default.
func jsString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return jsNumber(x)
	case float32:
		return jsNumber(float64(x))
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return jsNumber(f)
		}
		return x.String()
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = jsString(e) // null elements join as empty strings
		}
		return strings.Join(parts, ",")
	case []string:
		return strings.Join(x, ",")
	default:
		return "[object Object]"
	}
}

// jsNumber formats like Number.prototype.toString for finite values.
func jsNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // 1e+21, 1.5e-7
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[0]
	exp = strings.TrimLeft(exp[1:], "0")
	return mant + "e" + string(sign) + exp
}

// truthy is JavaScript truthiness for decoded JSON values.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0 && !math.IsNaN(x)
	case float32:
		return x != 0 && !math.IsNaN(float64(x))
	case int:
		return x != 0
	case int64:
		return x != 0
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	default:
		return true
	}
}

// isJSSpace is JavaScript's whitespace-or-line-terminator, the set that
// String.prototype.trim removes and \s matches.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', '\u2028', '\u2029', '\uFEFF':
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

// jsTrim is String.prototype.trim.
func jsTrim(s string) string { return strings.TrimFunc(s, isJSSpace) }

// JavaScript's \s and . (no s flag) as Go regex classes: Go's \s misses
// \v and the Unicode spaces, and Go's . matches \r and the line separators.
const (
	jsSpaceClass = `[\t\n\v\f\r\p{Zs}\x{2028}\x{2029}\x{FEFF}]`
	jsDotClass   = `[^\n\r\x{2028}\x{2029}]`
)

// translateJS rewrites \s and . of a JavaScript pattern into the classes
// above. It leaves escaped characters and bracket expressions alone, which
// is all the patterns of this package need.
func translateJS(src string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\\' && i+1 < len(src):
			if src[i+1] == 's' && !inClass {
				b.WriteString(jsSpaceClass)
			} else {
				b.WriteByte(c)
				b.WriteByte(src[i+1])
			}
			i++
		case c == '[' && !inClass:
			inClass = true
			b.WriteByte(c)
		case c == ']' && inClass:
			inClass = false
			b.WriteByte(c)
		case c == '.' && !inClass:
			b.WriteString(jsDotClass)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
