package userdocs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/services/sessionstore/userdocs"
)

// conformance runs the same checks on a store: documents are per kind
// and owner, updates of one document never lose each other, a failing
// update changes nothing, and keys that could escape are refused.
func conformance(t *testing.T, s userdocs.Store) {
	ctx := context.Background()
	ada := userdocs.Key{Kind: "profile", Scope: "users", Owner: "ada"}
	bob := userdocs.Key{Kind: "profile", Scope: "users", Owner: "bob"}
	local := userdocs.Key{Kind: "profile"}
	if _, found, err := s.Get(ctx, ada); err != nil || found {
		t.Fatalf("empty store: found=%v err=%v", found, err)
	}
	set := func(k userdocs.Key, doc string) {
		t.Helper()
		if err := s.Update(ctx, k, func([]byte, bool) ([]byte, error) { return []byte(doc), nil }); err != nil {
			t.Fatal(err)
		}
	}
	set(ada, `{"name":"Ada"}`)
	set(local, `{"name":"Local"}`)
	for k, want := range map[userdocs.Key]string{ada: "Ada", local: "Local"} {
		doc, found, err := s.Get(ctx, k)
		if err != nil || !found || !contains(doc, want) {
			t.Errorf("%+v: %s found=%v err=%v", k, doc, found, err)
		}
	}
	if _, found, _ := s.Get(ctx, bob); found {
		t.Error("bob sees a document")
	}

	// Concurrent updates of one document: none is lost.
	const n = 20
	counter := userdocs.Key{Kind: "counter", Scope: "users", Owner: "ada"}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			err := s.Update(ctx, counter, func(old []byte, found bool) ([]byte, error) {
				v := 0
				if found {
					fmt.Sscan(string(old), &v)
				}
				return []byte(fmt.Sprint(v + 1)), nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if doc, _, _ := s.Get(ctx, counter); string(doc) != fmt.Sprint(n) {
		t.Errorf("counter %s, want %d", doc, n)
	}

	boom := errors.New("refused")
	if err := s.Update(ctx, ada, func([]byte, bool) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("update error %v", err)
	}
	if doc, _, _ := s.Get(ctx, ada); !contains(doc, "Ada") {
		t.Errorf("a failed update changed the document: %s", doc)
	}
	// Deleting one document leaves the owner's others and the other
	// owners' alone; deleting what is not there is no error.
	for range 2 {
		if err := s.Delete(ctx, ada); err != nil {
			t.Fatal(err)
		}
	}
	if _, found, err := s.Get(ctx, ada); found || err != nil {
		t.Errorf("deleted document: found=%v err=%v", found, err)
	}
	if doc, _, _ := s.Get(ctx, counter); string(doc) != fmt.Sprint(n) {
		t.Errorf("another kind of the owner's went with it: %s", doc)
	}
	if doc, _, _ := s.Get(ctx, local); !contains(doc, "Local") {
		t.Errorf("another owner's went with it: %s", doc)
	}
	set(ada, `{"name":"Ada again"}`)
	if doc, _, _ := s.Get(ctx, ada); !contains(doc, "Ada again") {
		t.Errorf("written after delete: %s", doc)
	}
	for _, bad := range []userdocs.Key{{Kind: "../x"}, {Kind: "profile", Scope: "users", Owner: "../../etc"}, {Kind: "profile", Owner: "ada"}} {
		if _, _, err := s.Get(ctx, bad); err == nil {
			t.Errorf("key %+v accepted", bad)
		}
		if err := s.Delete(ctx, bad); err == nil {
			t.Errorf("delete of key %+v accepted", bad)
		}
	}
}

func contains(doc []byte, s string) bool { return strings.Contains(string(doc), s) }

func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	s, err := userdocs.New(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	conformance(t, s)
	// The local profile is the original's <data-dir>/profile.json; a
	// user's is under users/<id>/, private.
	for _, p := range []string{"profile.json", "users/ada/profile.json"} {
		info, err := os.Stat(filepath.Join(dir, p))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", p, info, err)
		}
	}
	if info, err := os.Stat(filepath.Join(dir, "users", "ada")); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("users/ada: %v %v", info, err)
	}
}

func TestPostgresStore(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := userdocs.New(context.Background(), "", pool)
	if err != nil {
		t.Fatal(err)
	}
	conformance(t, s)
	// Migrating again (a second store process) is harmless.
	if _, err := userdocs.New(context.Background(), "", pool); err != nil {
		t.Fatal(err)
	}
}
