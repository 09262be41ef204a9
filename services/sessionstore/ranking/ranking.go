// Package ranking orders memory frames: a search hit's fused keyword and
// vector relevance combined with the frame's importance, its recency
// (decaying with a half-life) and how often it was used, weighted by a
// named profile. It is pure arithmetic (no I/O, no clock of its own).
// See docs/memory.md.
package ranking

import (
	"math"
	"slices"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// Profile names.
const (
	Balanced  = "balanced"
	Recent    = "recent"
	Important = "important"
	Connected = "connected"
	// CatchUp ranks without a query (recall of what matters lately):
	// importance and recency only.
	CatchUp = "catch_up"
)

// Profile weighs the signals; the weights of a profile sum to 1, so a
// score is in [0, 1].
type Profile struct {
	Name                                          string
	Relevance, Importance, Recency, Access, Graph float64
	// HalfLife is the age at which recency is worth half.
	HalfLife time.Duration
}

// Profiles are the documented profiles by name.
var Profiles = map[string]Profile{
	Balanced:  {Name: Balanced, Relevance: 0.60, Importance: 0.15, Recency: 0.15, Access: 0.10, HalfLife: 30 * 24 * time.Hour},
	Recent:    {Name: Recent, Relevance: 0.45, Importance: 0.10, Recency: 0.40, Access: 0.05, HalfLife: 7 * 24 * time.Hour},
	Important: {Name: Important, Relevance: 0.45, Importance: 0.40, Recency: 0.05, Access: 0.10, HalfLife: 90 * 24 * time.Hour},
	Connected: {Name: Connected, Relevance: 0.45, Importance: 0.10, Recency: 0.10, Access: 0.05, Graph: 0.30, HalfLife: 30 * 24 * time.Hour},
	CatchUp:   {Name: CatchUp, Importance: 0.50, Recency: 0.50, HalfLife: 7 * 24 * time.Hour},
}

// Names lists the profiles a request may name.
var Names = []string{Balanced, Recent, Important, Connected}

// Get returns the named profile; an empty name is Balanced, an unknown
// one ok false.
func Get(name string) (Profile, bool) {
	if name == "" {
		name = Balanced
	}
	p, ok := Profiles[name]
	return p, ok && slices.Contains(append(Names, CatchUp), name)
}

// importance is each importance's worth.
var importance = map[string]float64{
	protocol.ImportanceCritical:   1,
	protocol.ImportanceImportant:  0.75,
	protocol.ImportanceNormal:     0.5,
	protocol.ImportanceTemporary:  0.25,
	protocol.ImportanceDeprecated: 0,
}

// accessSaturation is the access count worth the whole Access weight.
const accessSaturation = 50

// Signals are what is known of one frame for one query.
type Signals struct {
	// Relevance is the fused keyword/vector score over its best possible
	// value, in [0, 1].
	Relevance  float64
	Importance string
	// Updated is the frame's last write (or creation).
	Updated     time.Time
	AccessCount int
	// Graph is in [0, 1]: 1 when the frame names an entity the query
	// names, less for a neighbour of one, 0 for none.
	Graph float64
}

// ImportanceWorth is an importance's worth in [0, 1] (normal for an
// unknown one).
func ImportanceWorth(v string) float64 {
	if w, ok := importance[v]; ok {
		return w
	}
	return importance[protocol.ImportanceNormal]
}

// Recency is 1 for a frame written now, 1/2 at one half-life.
func Recency(updated, now time.Time, halfLife time.Duration) float64 {
	if updated.IsZero() || halfLife <= 0 {
		return 0
	}
	age := now.Sub(updated)
	if age <= 0 {
		return 1
	}
	return math.Exp2(-float64(age) / float64(halfLife))
}

// Access is the worth of n uses: logarithmic, 1 at accessSaturation.
func Access(n int) float64 {
	if n <= 0 {
		return 0
	}
	return min(1, math.Log1p(float64(n))/math.Log1p(accessSaturation))
}

// Score combines the signals by p at now, in [0, 1].
func (p Profile) Score(s Signals, now time.Time) float64 {
	return p.Relevance*min(1, max(0, s.Relevance)) +
		p.Importance*ImportanceWorth(s.Importance) +
		p.Recency*Recency(s.Updated, now, p.HalfLife) +
		p.Access*Access(s.AccessCount) +
		p.Graph*min(1, max(0, s.Graph))
}
