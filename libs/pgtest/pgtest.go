// Package pgtest gives tests a real, empty PostgreSQL database (DESIGN §8).
//
// The server is found once per test process, in this order:
//
//  1. WAGGLE_TEST_POSTGRES_URL, when set (CI sets it through
//     scripts/with-postgres.sh);
//  2. a container started with testcontainers-go, when a Docker engine
//     answers (checked with a short dial, so machines without Docker pay
//     nothing and print nothing);
//  3. a throwaway cluster made with the local initdb and run as a child of
//     the test process (as the postgres user when running as root, since
//     PostgreSQL refuses root); it dies with the process;
//  4. otherwise the test is skipped, loudly.
//
// Every URL call creates its own database on that server (dropped when the
// test ends), so tests and packages never see each other's data.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable holding an existing server's URL.
const EnvURL = "WAGGLE_TEST_POSTGRES_URL"

var (
	once     sync.Once
	adminURL string
	why      string // why there is no server, when adminURL is empty
)

// URL returns the URL of a new empty database for t, dropped at t's end.
// It skips t when no PostgreSQL can be had (see the package doc).
func URL(t testing.TB) string {
	t.Helper()
	once.Do(func() { adminURL, why = findServer() })
	if adminURL == "" {
		t.Skipf("pgtest: SKIPPING — no PostgreSQL for this test: %s. Set %s or install PostgreSQL (initdb) to run it.", why, EnvURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", redact(adminURL), err)
	}
	defer conn.Close(ctx)
	name := "waggle_t_" + randomHex(8)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatalf("pgtest: parse URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// findServer returns an admin URL of a reachable server, or why not.
func findServer() (string, string) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, ""
	}
	var reasons []string
	if dockerReachable() {
		u, err := startContainer()
		if err == nil {
			return u, ""
		}
		reasons = append(reasons, "testcontainers: "+err.Error())
	} else {
		reasons = append(reasons, "no Docker engine")
	}
	u, err := startLocal()
	if err == nil {
		return u, ""
	}
	reasons = append(reasons, "local initdb: "+err.Error())
	return "", fmt.Sprintf("%s unset; %s", EnvURL, strings.Join(reasons, "; "))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
