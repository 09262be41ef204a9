package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
)

// TestSearchMillion measures search over 1,000,000 messages (50,000
// sessions of 20 messages, all in one workspace: the worst case, since
// search is per workspace) and logs p50/p99 per query kind. It is a
// measurement, not a unit test: it runs only with WAGGLE_PG_BENCH=1 and
// never in make test:
//
//	WAGGLE_PG_BENCH=1 ./scripts/with-postgres.sh go test -run TestSearchMillion -v -timeout 30m ./services/sessionstore/pgstore/
func TestSearchMillion(t *testing.T) {
	if os.Getenv("WAGGLE_PG_BENCH") == "" {
		t.Skip("set WAGGLE_PG_BENCH=1 to run the 1M-message search benchmark")
	}
	const (
		sessions = 50_000
		perSess  = 20
		ws       = "bench"
	)
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// A vocabulary of 5,000 made-up words, Zipf-distributed, plus marker
	// words planted at known rates.
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 5000)
	for i := range vocab {
		var b strings.Builder
		for range 4 + rng.IntN(6) {
			b.WriteByte(byte('a' + rng.IntN(26)))
		}
		vocab[i] = b.String()
	}
	zipf := rand.NewZipf(rng, 1.1, 1, uint64(len(vocab)-1))
	markers := map[string]int{"quasar": 1000, "nebula": 100, "comet": 10} // one message in N
	sentence := func() string {
		words := make([]string, 8+rng.IntN(10))
		for i := range words {
			words[i] = vocab[zipf.Uint64()]
		}
		for m, n := range markers {
			if rng.IntN(n) == 0 {
				words[rng.IntN(len(words))] = m
			}
		}
		return strings.Join(words, " ")
	}

	start := time.Now()
	if _, err := conn.Exec(ctx, `INSERT INTO workspaces (id, doc, created) VALUES ($1, '{"id":"bench","name":"bench"}', '2026-01-01T00:00:00.000Z')`, ws); err != nil {
		t.Fatal(err)
	}
	// Build the trigram index once after the load, not row by row.
	if _, err := conn.Exec(ctx, `DROP INDEX session_lines_search_trgm`); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sessRows := make([][]any, sessions)
	for i := range sessRows {
		id := fmt.Sprintf("s%06d", i)
		sessRows[i] = []any{ws, id, `{"type":"meta","title":null,"created":"2026-01-01T00:00:00.000Z"}`, perSess, perSess, base.Add(time.Duration(i) * time.Second)}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"sessions"}, []string{"workspace", "id", "meta", "message_count", "line_count", "last_active"}, pgx.CopyFromRows(sessRows)); err != nil {
		t.Fatal(err)
	}
	i := 0
	total := sessions * perSess
	n, err := conn.CopyFrom(ctx, pgx.Identifier{"session_lines"}, []string{"workspace", "session", "seq", "mline", "lcontent", "line"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == total {
				return nil, nil
			}
			sess, k := i/perSess, i%perSess+1
			i++
			content := sentence()
			role := "user"
			if k%2 == 0 {
				role = "assistant"
			}
			line := `{"role":"` + role + `","content":"` + content + `","timestamp":"2026-01-01T00:00:00.000Z"}`
			return []any{ws, fmt.Sprintf("s%06d", sess), k, k, content, line}, nil
		}))
	if err != nil || n != int64(total) {
		t.Fatalf("copy: %d rows, %v", n, err)
	}
	loaded := time.Since(start)
	if _, err := conn.Exec(ctx, `CREATE INDEX session_lines_search_trgm ON session_lines USING gin (lcontent gin_trgm_ops) WHERE mline <= 50`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d messages in %d sessions: COPY %v, index+analyze %v", total, sessions, loaded.Round(time.Millisecond), (time.Since(start) - loaded).Round(time.Millisecond))

	kinds := []struct {
		name    string
		queries []string
	}{
		{"rare (1 message in 1000)", []string{"quasar"}},
		{"medium (1 in 100)", []string{"nebula"}},
		{"common (1 in 10)", []string{"comet"}},
		{"vocabulary words", vocab[100:130]},
		{"no match", []string{"zzqqxx", "xylophonic", "qqqq"}},
	}
	var all []time.Duration
	for _, k := range kinds {
		var ds []time.Duration
		var hits int
		for r := range 60 {
			q := k.queries[r%len(k.queries)]
			t0 := time.Now()
			res, err := s.SearchSessions(ctx, protocol.SessionSearchRequest{Workspace: ws, Query: q})
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(t0))
			hits = len(res)
		}
		all = append(all, ds...)
		p50, p99 := pct(ds, 50), pct(ds, 99)
		t.Logf("%-26s p50 %8v  p99 %8v  (results/page %d)", k.name, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), hits)
	}
	t.Logf("%-26s p50 %8v  p99 %8v", "all", pct(all, 50).Round(10*time.Microsecond), pct(all, 99).Round(10*time.Microsecond))
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}
