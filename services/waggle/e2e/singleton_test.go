package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestSecondJSONLStoreWaits: a second JSONL session store on the same bus
// would split the sessions; it waits until the first one stops, then
// takes over.
func TestSecondJSONLStoreWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	natsAddr := ln.Addr().String()
	ln.Close()
	hub := waggletest.Start(t, waggletest.WithConfig(func(c *appConfig) {
		c.NATSListen = natsAddr
		c.Targets = []string{app.TargetGateway, app.TargetTurnRunner, app.TargetApproval, app.TargetCommand}
	}))
	dataDir := t.TempDir()
	storeCfg := app.Config{DataDir: dataDir, NATSURL: hub.App.NATSURL(), NATSNkey: app.NATSCredentials(hub.DataDir), Targets: []string{app.TargetSessionStore}, ShutdownTimeout: 5 * time.Second}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	first := app.New(storeCfg, log)
	if err := first.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hub.Chat(map[string]any{"message": "before", "session": "one"}).All(t)

	second := app.New(storeCfg, log)
	started := make(chan error, 1)
	go func() { started <- second.Start(context.Background()) }()
	select {
	case err := <-started:
		t.Fatalf("second store started while the first runs (err %v)", err)
	case <-time.After(1500 * time.Millisecond):
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second store did not take over after the first stopped")
	}
	defer second.Stop(stopCtx)
	var h struct{ Count int }
	hub.JSON("GET", "/api/history?session=one", nil, &h)
	if h.Count != 2 {
		t.Fatalf("history through the second store: %d messages", h.Count)
	}
}

// TestWaitingStoreHoldsItsMetricsPort: a process whose modules take a
// while to start (here a second session store waiting for the first's
// lease, as after a crash) listens on --metrics-addr from its start and
// says it is starting. Listening only once every module had started left
// the port free for seconds: another process could take it, and a probe
// of /health got that process's answer (e2e/distributed
// TestSessionFIFOAcrossFullRestart failed so: its restarted services
// process could not bind its port after the store's 6 s wait).
func TestWaitingStoreHoldsItsMetricsPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	natsAddr := ln.Addr().String()
	ln.Close()
	hub := waggletest.Start(t, waggletest.WithConfig(func(c *appConfig) {
		c.NATSListen = natsAddr
		c.Targets = []string{app.TargetGateway, app.TargetTurnRunner, app.TargetApproval, app.TargetCommand}
	}))
	dataDir := t.TempDir()
	storeCfg := app.Config{DataDir: dataDir, NATSURL: hub.App.NATSURL(), NATSNkey: app.NATSCredentials(hub.DataDir), Targets: []string{app.TargetSessionStore}, ShutdownTimeout: 5 * time.Second}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	first := app.New(storeCfg, log)
	if err := first.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	firstStopped := false
	defer func() {
		if !firstStopped {
			first.Stop(stopCtx)
		}
	}()

	secondCfg := storeCfg
	secondCfg.MetricsAddr = waggletest.FreeAddr(t)
	second := app.New(secondCfg, log)
	started := make(chan error, 1)
	go func() { started <- second.Start(context.Background()) }()
	health := func() (int, string, error) {
		resp, err := http.Get("http://" + secondCfg.MetricsAddr + "/health")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		var body struct{ Status string }
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Status, nil
	}
	// While it waits for the first store's lease, its port answers: starting.
	waitfor.Within(5*time.Second).Every(20*time.Millisecond).NoError(t, "the waiting store's /health says starting", func() error {
		code, status, err := health()
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable || status != "starting" {
			return fmt.Errorf("/health %d %q", code, status)
		}
		return nil
	})
	select {
	case err := <-started:
		t.Fatalf("second store started while the first runs (err %v)", err)
	default:
	}
	if err := first.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	firstStopped = true
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second store did not take over after the first stopped")
	}
	defer second.Stop(stopCtx)
	if code, status, err := health(); err != nil || code != http.StatusOK || status != "ok" {
		t.Fatalf("/health once started: %d %q %v", code, status, err)
	}
}
