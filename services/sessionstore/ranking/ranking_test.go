package ranking_test

import (
	"math"
	"testing"
	"time"

	"github.com/waggle-os/core/services/sessionstore/ranking"
)

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func TestProfilesWeighToOne(t *testing.T) {
	for name, p := range ranking.Profiles {
		if sum := p.Relevance + p.Importance + p.Recency + p.Access + p.Graph; math.Abs(sum-1) > 1e-9 {
			t.Errorf("%s weights sum to %v", name, sum)
		}
		if p.HalfLife <= 0 {
			t.Errorf("%s has no half-life", name)
		}
	}
	if _, ok := ranking.Get("nonsense"); ok {
		t.Error("an unknown profile was accepted")
	}
	if p, ok := ranking.Get(""); !ok || p.Name != ranking.Balanced {
		t.Errorf("default profile = %v", p.Name)
	}
}

func TestRecencyHalves(t *testing.T) {
	hl := 7 * 24 * time.Hour
	if r := ranking.Recency(now.Add(-hl), now, hl); math.Abs(r-0.5) > 1e-9 {
		t.Errorf("one half-life = %v", r)
	}
	if r := ranking.Recency(now.Add(-2*hl), now, hl); math.Abs(r-0.25) > 1e-9 {
		t.Errorf("two half-lives = %v", r)
	}
	if ranking.Recency(now, now, hl) != 1 || ranking.Recency(time.Time{}, now, hl) != 0 {
		t.Error("now is not 1 or zero time is not 0")
	}
}

// Equal relevance: importance decides; then recency; then use.
func TestOrderOfEqualMatches(t *testing.T) {
	p, _ := ranking.Get(ranking.Balanced)
	base := ranking.Signals{Relevance: 0.5, Importance: "normal", Updated: now.Add(-time.Hour)}
	critical := base
	critical.Importance = "critical"
	// The critical frame is a little less relevant (ranked second of two
	// equal keyword matches) and a minute older: it still wins.
	critical.Relevance -= 0.01
	critical.Updated = critical.Updated.Add(-time.Minute)
	if p.Score(critical, now) <= p.Score(base, now) {
		t.Errorf("importance does not decide between equal matches")
	}
	used := base
	used.AccessCount = 10
	if p.Score(used, now) <= p.Score(base, now) {
		t.Error("use does not strengthen")
	}
	older := base
	older.Updated = now.Add(-60 * 24 * time.Hour)
	if p.Score(older, now) >= p.Score(base, now) {
		t.Error("age does not decay")
	}
	// Relevance still dominates: a clearly better match beats importance.
	better := base
	better.Relevance = 1
	if p.Score(better, now) <= p.Score(critical, now) {
		t.Error("a critical weak match outranks a normal strong one")
	}
}

func TestProfilesDiffer(t *testing.T) {
	fresh := ranking.Signals{Relevance: 0.5, Importance: "normal", Updated: now}
	vital := ranking.Signals{Relevance: 0.5, Importance: "critical", Updated: now.Add(-60 * 24 * time.Hour)}
	linked := ranking.Signals{Relevance: 0.5, Importance: "normal", Updated: now.Add(-30 * 24 * time.Hour), Graph: 1}
	score := func(name string, s ranking.Signals) float64 { p, _ := ranking.Get(name); return p.Score(s, now) }
	if score(ranking.Recent, fresh) <= score(ranking.Recent, vital) {
		t.Error("recent prefers the old critical frame")
	}
	if score(ranking.Important, vital) <= score(ranking.Important, fresh) {
		t.Error("important prefers the fresh normal frame")
	}
	if score(ranking.Connected, linked) <= score(ranking.Connected, fresh) {
		t.Error("connected ignores the graph")
	}
}
