package lifecycle_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/lifecycle"
)

// Without WAGGLE_TEST_POSTGRES_URL, libs/pgtest's one cluster is reaped
// by its own goroutine when the process exits.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/waggle-os/core/libs/pgtest.(*localCluster).start.func1"))
}

var ctx = context.Background()

func each(t *testing.T, fn func(t *testing.T, b frames.Backend)) {
	t.Run("jsonl", func(t *testing.T) { fn(t, frames.NewJSONL(t.TempDir())) })
	t.Run("postgres", func(t *testing.T) {
		pool, err := pgxpool.New(ctx, pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		b, err := frames.OpenPostgres(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		fn(t, b)
	})
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var ws = frames.Mind{Kind: frames.KindWorkspace, ID: "w1"}

func add(t *testing.T, b frames.Backend, id, content, importance string, at time.Time, accesses int) {
	t.Helper()
	ts := protocol.Timestamp(at)
	if _, _, err := b.Add(ctx, ws, frames.Frame{ID: id, Content: content, Importance: importance, Source: protocol.SourceUserStated, Created: ts, Updated: ts}); err != nil {
		t.Fatal(err)
	}
	for range accesses {
		if _, err := b.Access(ctx, ws, id); err != nil {
			t.Fatal(err)
		}
	}
}

func importance(t *testing.T, b frames.Backend, id string) frames.Frame {
	t.Helper()
	f, err := b.Get(ctx, ws, id)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDecayStrengthenUndo(t *testing.T) {
	each(t, func(t *testing.T, b frames.Backend) {
		clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		dir := t.TempDir()
		w := lifecycle.New(lifecycle.Config{Backend: b, DataDir: dir, Now: clk.now})
		old := clk.now().Add(-8 * 24 * time.Hour)
		add(t, b, "tmp-old", "a passing note", protocol.ImportanceTemporary, old, 0)
		add(t, b, "tmp-new", "a fresh note", protocol.ImportanceTemporary, clk.now().Add(-time.Hour), 0)
		add(t, b, "tmp-used", "a used note", protocol.ImportanceTemporary, old, 1)
		add(t, b, "often", "the deploy checklist", protocol.ImportanceNormal, old, 5)
		add(t, b, "seldom", "the lunch menu", protocol.ImportanceNormal, old, 1)

		cs, err := w.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, c := range cs {
			got[c.ID] = c.Step + " " + c.From + "→" + c.To
		}
		want := map[string]string{"tmp-old": "decay temporary→deprecated", "often": "strengthen normal→important"}
		if len(got) != len(want) || got["tmp-old"] != want["tmp-old"] || got["often"] != want["often"] {
			t.Fatalf("changes = %v, want %v", got, want)
		}
		f := importance(t, b, "tmp-old")
		if f.Importance != protocol.ImportanceDeprecated || f.Updated != protocol.Timestamp(old) || f.Content != "a passing note" {
			t.Fatalf("decayed frame = %+v (nothing but importance may change)", f)
		}
		if importance(t, b, "often").Importance != protocol.ImportanceImportant {
			t.Fatal("not strengthened")
		}
		if cs, _ := w.Sweep(ctx); len(cs) != 0 {
			t.Fatalf("a second sweep changed %v", cs)
		}

		// Undo within the day, from a restarted worker (the log is on disk).
		clk.add(time.Hour)
		w = lifecycle.New(lifecycle.Config{Backend: b, DataDir: dir, Now: clk.now})
		if c, err := w.Undo(ctx, ws.Key(), "tmp-old"); err != nil || c.To != protocol.ImportanceTemporary {
			t.Fatalf("undo = %+v %v", c, err)
		}
		if importance(t, b, "tmp-old").Importance != protocol.ImportanceTemporary {
			t.Fatal("undo did not restore")
		}
		if cs, _ := w.Sweep(ctx); len(cs) != 0 {
			t.Fatalf("an undone change was made again: %v", cs)
		}
		if _, err := w.Undo(ctx, ws.Key(), "tmp-old"); !errors.Is(err, lifecycle.ErrTooLate) {
			t.Fatalf("undo twice: %v", err)
		}
		// After the window, a change can no longer be undone.
		clk.add(25 * time.Hour)
		if _, err := w.Undo(ctx, ws.Key(), "often"); !errors.Is(err, lifecycle.ErrTooLate) {
			t.Fatalf("undo after a day: %v", err)
		}
		recent, err := w.Recent()
		if err != nil || len(recent) != 0 {
			t.Fatalf("recent after the window = %v %v", recent, err)
		}
	})
}

func TestLeadership(t *testing.T) {
	b := frames.NewJSONL(t.TempDir())
	led := make(chan struct{})
	released := make(chan struct{})
	w := lifecycle.New(lifecycle.Config{Backend: b, DataDir: t.TempDir(), Interval: time.Hour,
		Lead: func(ctx context.Context) (func(), error) {
			close(led)
			return func() { close(released) }, nil
		}})
	w.Start(ctx)
	<-led
	w.Stop()
	select {
	case <-released:
	default:
		t.Fatal("leadership not released on Stop")
	}
}

func TestConsolidateNearDuplicates(t *testing.T) {
	each(t, func(t *testing.T, b frames.Backend) {
		clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		w := lifecycle.New(lifecycle.Config{Backend: b, DataDir: t.TempDir(), Now: clk.now})
		at := clk.now().Add(-time.Hour)
		add(t, b, "plain", "The release train leaves on Friday.", protocol.ImportanceNormal, at, 0)
		add(t, b, "loud", "the RELEASE train leaves on friday!!", protocol.ImportanceImportant, at.Add(time.Minute), 0)
		add(t, b, "other", "The release train leaves on Monday.", protocol.ImportanceNormal, at, 0)
		add(t, b, "short", "Friday release", protocol.ImportanceNormal, at, 0)
		add(t, b, "short2", "release Friday", protocol.ImportanceNormal, at, 0)
		cs, err := w.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].ID != "plain" || cs[0].Step != lifecycle.StepConsolidate || cs[0].To != protocol.ImportanceDeprecated {
			t.Fatalf("changes = %+v, want the weaker duplicate consolidated", cs)
		}
		if f := importance(t, b, "plain"); f.Importance != protocol.ImportanceDeprecated || f.Content != "The release train leaves on Friday." {
			t.Fatalf("consolidated frame = %+v (kept, deprecated)", f)
		}
		if _, err := w.Undo(ctx, ws.Key(), "plain"); err != nil || importance(t, b, "plain").Importance != protocol.ImportanceNormal {
			t.Fatalf("undo consolidate: %v", err)
		}
		if cs, _ := w.Sweep(ctx); len(cs) != 0 {
			t.Fatalf("consolidated again after undo: %v", cs)
		}
	})
}

// Paraphrases — frames in other words whose vectors of one model are
// nearly the same — are consolidated like same-term duplicates: the
// weaker deprecated, the stronger kept; a merely related frame (its
// vector less alike) and a frame of another model are left alone.
func TestConsolidateParaphrases(t *testing.T) {
	each(t, func(t *testing.T, b frames.Backend) {
		clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		w := lifecycle.New(lifecycle.Config{Backend: b, DataDir: t.TempDir(), Now: clk.now})
		at := clk.now().Add(-time.Hour)
		add(t, b, "deploy", "Deploys run every Friday at noon.", protocol.ImportanceImportant, at, 0)
		add(t, b, "reworded", "We ship to production on Fridays around midday.", protocol.ImportanceNormal, at.Add(time.Minute), 0)
		add(t, b, "related", "Deploys are frozen in December.", protocol.ImportanceNormal, at.Add(2*time.Minute), 0)
		add(t, b, "elsewise", "Production releases happen weekly on Friday lunchtime.", protocol.ImportanceNormal, at.Add(3*time.Minute), 0)
		// Unit-length vectors: reworded is 0.99 alike deploy, related 0.8.
		vecs := map[string][]float32{
			"deploy":   {1, 0, 0},
			"reworded": {0.99, 0.141, 0},
			"related":  {0.8, 0, 0.6},
		}
		if err := b.SetVectors(ctx, ws, "m1", vecs); err != nil {
			t.Fatal(err)
		}
		// The same direction by another model is not comparable.
		if err := b.SetVectors(ctx, ws, "m2", map[string][]float32{"elsewise": {1, 0, 0}}); err != nil {
			t.Fatal(err)
		}
		cs, err := w.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].ID != "reworded" || cs[0].Step != lifecycle.StepConsolidate {
			t.Fatalf("changes = %+v, want the reworded frame consolidated", cs)
		}
		if f := importance(t, b, "deploy"); f.Importance != protocol.ImportanceImportant {
			t.Fatalf("the kept frame changed: %+v", f)
		}
		if f := importance(t, b, "reworded"); f.Importance != protocol.ImportanceDeprecated || f.Content != "We ship to production on Fridays around midday." {
			t.Fatalf("consolidated paraphrase = %+v (kept, deprecated)", f)
		}
	})
}
