package knowledge

import (
	"net/url"
	"slices"
	"testing"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

func searchIDs(t *testing.T, srv *waggletest.Server, query string) ([]string, int) {
	t.Helper()
	var out struct {
		Results []obj `json:"results"`
		Error   string
	}
	st := srv.JSON("GET", "/api/memory/search?"+query, nil, &out)
	ids := make([]string, 0, len(out.Results))
	for _, r := range out.Results {
		ids = append(ids, r["id"].(string))
	}
	return ids, st
}

func TestRankingByImportance(t *testing.T) {
	t.Run("jsonl", func(t *testing.T) { testRankingByImportance(t, waggletest.Start(t)) })
	t.Run("postgres", func(t *testing.T) {
		pg := pgtest.URL(t)
		testRankingByImportance(t, waggletest.Start(t, waggletest.WithConfig(func(c *app.Config) {
			c.SessionStore.PostgresURL, c.SessionStore.Store = pg, "postgres"
		})))
	})
}

func testRankingByImportance(t *testing.T, srv *waggletest.Server) {
	save := func(content string, importance any) string {
		var out obj
		if st := srv.JSON("POST", "/api/memory/frames", obj{"workspace": "w1", "content": content, "importance": importance}, &out); st != 200 {
			t.Fatalf("save %q: %d %v", content, st, out)
		}
		return out["frameId"].(string)
	}
	// Two frames match "deploys friday" alike; the critical one is saved
	// first (older) and is the longer text (a weaker keyword match).
	critical := save("Deploys happen on Friday afternoons after the review", "critical")
	normal := save("Deploys happen on Friday", "normal")
	save("Lunch is at noon", "critical")

	for _, profile := range []string{"", "balanced", "important"} {
		ids, st := searchIDs(t, srv, "workspace=w1&q="+url.QueryEscape("deploys friday")+"&profile="+profile)
		if st != 200 || len(ids) != 2 || ids[0] != critical || ids[1] != normal {
			t.Errorf("profile %q: %d %v, want the critical frame %s first", profile, st, ids, critical)
		}
	}
	if _, st := searchIDs(t, srv, "workspace=w1&q=deploys&profile=loudest"); st != 400 {
		t.Errorf("unknown profile: %d, want 400", st)
	}
}

// TestConnectedRanking: with profile=connected, of two frames that match
// a query alike, the one naming a neighbour (in the knowledge graph) of
// an entity the query names ranks first.
func TestConnectedRanking(t *testing.T) {
	srv := waggletest.Start(t)
	save := func(content string) string {
		var out obj
		if st := srv.JSON("POST", "/api/memory/frames", obj{"workspace": "w1", "content": content}, &out); st != 200 {
			t.Fatalf("save %q: %d %v", content, st, out)
		}
		return out["frameId"].(string)
	}
	// Falcon's frame is the older: on a tie the newer frame wins, so only
	// the graph can put it first.
	falcon := save("Project Falcon ships in May")
	kestrel := save("Project Kestrel ships in May")
	save("Ada Lovelace leads Project Falcon")
	waitRelation(t, srv, "workspace=w1", "Ada Lovelace", "leads", "Project Falcon")

	rank := func(profile string) (int, int) {
		ids, st := searchIDs(t, srv, "workspace=w1&q="+url.QueryEscape("what does Ada Lovelace ship")+"&profile="+profile)
		if st != 200 {
			t.Fatalf("search %s: %d", profile, st)
		}
		return slices.Index(ids, falcon), slices.Index(ids, kestrel)
	}
	if f, k := rank("balanced"); f < 0 || k < 0 || f < k {
		t.Errorf("balanced: falcon at %d, kestrel at %d; want the newer kestrel first", f, k)
	}
	if f, k := rank("connected"); f < 0 || k < 0 || f > k {
		t.Errorf("connected: falcon at %d, kestrel at %d; want falcon first", f, k)
	}
}
