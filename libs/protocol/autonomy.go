package protocol

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"time"
)

// AutonomyLevels lists the autonomy levels, least relaxed first.
var AutonomyLevels = []string{AutonomyNormal, AutonomyTrusted, AutonomyYolo}

// ValidAutonomy reports whether level is one of AutonomyLevels, exactly
// (levels are case-sensitive: "YOLO" is not a level).
func ValidAutonomy(level string) bool {
	return autonomyRank(level) >= 0
}

// autonomyRank orders the levels; -1 is not a level.
func autonomyRank(level string) int {
	switch level {
	case AutonomyNormal:
		return 0
	case AutonomyTrusted:
		return 1
	case AutonomyYolo:
		return 2
	}
	return -1
}

// ParseAutonomy reads a chat body's "autonomy" value strictly: an object
// with exactly the keys "level" (a string) and, optionally, "expiresAt"
// (an integer, or null for none), each at most once and spelt exactly so.
// Anything else — another shape, an unknown, repeated or differently
// cased key, a fractional or out-of-range time — is the zero Autonomy,
// which is "normal": a request the server cannot read exactly raises
// nothing, and no two readers of the same bytes can disagree about it.
func ParseAutonomy(raw []byte) Autonomy {
	a, ok := parseAutonomy(raw)
	if !ok {
		return Autonomy{}
	}
	return a
}

func parseAutonomy(raw []byte) (Autonomy, bool) {
	var a Autonomy
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return a, false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		key, isKey := tok.(string)
		if err != nil || !isKey || seen[key] {
			return a, false
		}
		seen[key] = true
		if tok, err = dec.Token(); err != nil {
			return a, false
		}
		switch key {
		case "level":
			s, ok := tok.(string)
			if !ok {
				return a, false
			}
			a.Level = s
		case "expiresAt":
			if tok == nil {
				continue // null: no expiry, as when the key is absent
			}
			n, ok := tok.(json.Number)
			if !ok {
				return a, false
			}
			v, err := strconv.ParseInt(string(n), 10, 64)
			if err != nil {
				return a, false
			}
			a.ExpiresAt = v
		default:
			return a, false
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return a, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return a, false
	}
	return a, true
}

// Capped returns a limited to the level max: when the level in force at
// now is above max, the result asks for max (keeping the expiry) and
// lowered is true. An unknown or empty max is "normal", so a policy that
// cannot be read allows no elevation.
func (a Autonomy) Capped(max string, now time.Time) (capped Autonomy, lowered bool) {
	if !ValidAutonomy(max) {
		max = AutonomyNormal
	}
	if autonomyRank(a.Effective(now)) <= autonomyRank(max) {
		return a, false
	}
	return Autonomy{Level: max, ExpiresAt: a.ExpiresAt}, true
}

// AutonomyLoweredText is the step a turn shows when its team's policy
// lowered the autonomy level the request asked for.
func AutonomyLoweredText(max string) string {
	return "Autonomy lowered to " + max + ": this team allows at most " + max + "."
}
