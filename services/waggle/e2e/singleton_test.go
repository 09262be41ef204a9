package e2e

import (
	"context"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

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
