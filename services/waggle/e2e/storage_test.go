package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/tmpfstest"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestDiskFull runs the server on a small tmpfs (data dir and the
// embedded NATS store both on it) and fills it: new chats are refused at
// once with 507 STORAGE_FULL, a turn already streaming ends with an error
// event, nothing persisted is torn or lost, /health says degraded; once
// space is freed chats work again within 10 s without a restart, and the
// server still stops within its budget.
func TestDiskFull(t *testing.T) {
	dir := tmpfstest.Mount(t, "16m")
	srv := waggletest.Start(t, waggletest.WithDataDir(filepath.Join(dir, "data")), waggletest.WithConfig(func(c *appConfig) {
		c.TurnRunner.EchoDelay = 150 * time.Millisecond
	}))
	if evs := srv.Chat(map[string]any{"message": "before the disk fills", "session": "full"}).All(t); lastName(evs) != "done" {
		t.Fatalf("chat before filling: %v", waggletest.Names(evs))
	}

	// A turn streaming while the disk fills: its reply (larger than the
	// page its file's last write left free) cannot be kept.
	streaming := srv.Chat(map[string]any{"message": strings.TrimSpace(strings.Repeat(strings.Repeat("w", 500)+" ", 20)), "session": "streaming"})
	if ev, err := streaming.Next(); err != nil {
		t.Fatalf("streaming turn: %v", err)
	} else if ev.Name == "error" || ev.Name == "done" {
		t.Fatalf("streaming turn ended at once: %s %s", ev.Name, ev.Data)
	}
	fill := tmpfstest.Fill(t, dir)

	// Refused before any stream, and once the fault is known (within half a
	// second of the disk filling) within 1 s each. A chat racing the first
	// failing write may wait out that write's timeout, but still gets 507.
	deadline := time.Now().Add(15 * time.Second)
	for refused := 0; refused < 5; {
		began := time.Now()
		resp := srv.Do(http.MethodPost, "/api/chat", map[string]any{"message": "while full", "session": "full"})
		took := time.Since(began)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusInsufficientStorage {
			var e struct{ Error, Code string }
			if err := json.Unmarshal(body, &e); err != nil || e.Code != "STORAGE_FULL" || !strings.Contains(e.Error, "storage is full") {
				t.Fatalf("refusal body %s", body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("refusal content type %q", ct)
			}
			if took > time.Second && refused > 0 {
				t.Fatalf("refused after %s, want within 1s", took)
			}
			if took <= time.Second {
				refused++
			}
			continue
		}
		if resp.StatusCode == http.StatusOK {
			// Accepted before the fault was noticed: it must end cleanly.
			evs := waggletest.NewStream(&http.Response{Body: io.NopCloser(bytes.NewReader(body))}).All(t)
			if n := lastName(evs); n != "done" && n != "error" {
				t.Fatalf("turn accepted while filling ended with %q", n)
			}
		} else {
			t.Fatalf("chat while full: %d %s", resp.StatusCode, body)
		}
		if time.Now().After(deadline) {
			t.Fatal("chats not refused with 507 while the disk is full")
		}
	}
	var health struct {
		Status  string
		Storage *struct {
			Full   bool
			Source string
			Reason string
		}
	}
	if code := srv.JSON(http.MethodGet, "/health", nil, &health); code != http.StatusServiceUnavailable || health.Status != "degraded" ||
		health.Storage == nil || !health.Storage.Full || !strings.Contains(health.Storage.Reason, "storage is full") {
		t.Fatalf("health while full: %d %+v %+v", code, health, health.Storage)
	}
	evs := streaming.All(t)
	if n := lastName(evs); n != "error" {
		t.Fatalf("streaming turn ended with %q, want error: %v", n, waggletest.Names(evs))
	}
	// Reads still work and what was persisted is intact.
	var hist struct {
		Messages []struct{ Role, Content string }
	}
	// (A chat accepted before the fault was noticed may have added lines.)
	if code := srv.JSON(http.MethodGet, "/api/history?workspace=default&session=full", nil, &hist); code != 200 || len(hist.Messages) < 2 ||
		hist.Messages[0].Content != "before the disk fills" || hist.Messages[1].Content != echoText("before the disk fills") {
		t.Fatalf("history while full: %d %+v", code, hist)
	}
	kept := len(hist.Messages)
	checkJSONL(t, filepath.Join(dir, "data"))

	freed := time.Now()
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	waitfor.Within(10*time.Second).Every(100*time.Millisecond).NoError(t, "a working chat after freeing space", func() error {
		resp := srv.Do(http.MethodPost, "/api/chat", map[string]any{"message": "after", "session": "full"})
		if resp.StatusCode == http.StatusOK {
			evs := waggletest.NewStream(resp).All(t)
			if lastName(evs) == "done" {
				return nil
			}
			t.Logf("chat right after recovery ended %v", waggletest.Names(evs))
		} else {
			resp.Body.Close()
		}
		return fmt.Errorf("last status %d", resp.StatusCode)
	})
	t.Logf("recovered %s after space was freed", time.Since(freed).Round(time.Millisecond))
	health.Storage = nil
	if code := srv.JSON(http.MethodGet, "/health", nil, &health); code != 200 || health.Storage != nil {
		t.Fatalf("health after recovery: %d %+v", code, health)
	}
	if code := srv.JSON(http.MethodGet, "/api/history?workspace=default&session=full", nil, &hist); code != 200 || len(hist.Messages) != kept+2 ||
		hist.Messages[kept].Content != "after" || hist.Messages[kept+1].Content != echoText("after") {
		t.Fatalf("history after recovery: %d %+v", code, hist)
	}
	checkJSONL(t, filepath.Join(dir, "data"))

	began := time.Now()
	srv.Stop()
	if took := time.Since(began); took > srv.Config.ShutdownTimeout {
		t.Fatalf("shutdown took %s, budget %s", took, srv.Config.ShutdownTimeout)
	}
}

func lastName(evs []waggletest.Event) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].Name
}

// checkJSONL asserts every session file under dataDir is whole JSON lines.
func checkJSONL(t *testing.T, dataDir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dataDir, "workspaces", "*", "sessions", "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no session files")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			t.Fatalf("%s ends in a torn line: %q", filepath.Base(f), data[max(0, len(data)-80):])
		}
		for _, ln := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
			if !json.Valid(ln) {
				t.Fatalf("%s has a line that is not JSON: %q", filepath.Base(f), ln)
			}
		}
	}
}

// TestDiskFullShutdown stops the server while its disk is still full (and
// JetStream's writes fail): shutdown stays within its budget (the default
// 15 s; a turn's cleanup waits out KV write timeouts meanwhile).
func TestDiskFullShutdown(t *testing.T) {
	dir := tmpfstest.Mount(t, "16m")
	srv := waggletest.Start(t, waggletest.WithDataDir(filepath.Join(dir, "data")), waggletest.WithConfig(func(c *appConfig) {
		c.TurnRunner.EchoDelay = 100 * time.Millisecond
		c.ShutdownTimeout = 15 * time.Second
	}))
	streaming := srv.Chat(map[string]any{"message": strings.TrimSpace(strings.Repeat(strings.Repeat("w", 500)+" ", 40)), "session": "s"})
	if _, err := streaming.Next(); err != nil {
		t.Fatal(err)
	}
	tmpfstest.Fill(t, dir)
	waitfor.Within(15*time.Second).True(t, "chat refused with 507", func() bool {
		resp := srv.Do(http.MethodPost, "/api/chat", map[string]any{"message": "while full", "session": "other"})
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInsufficientStorage && resp.StatusCode != http.StatusOK {
			t.Fatalf("chat while full: %d", resp.StatusCode)
		}
		return resp.StatusCode == http.StatusInsufficientStorage
	})
	drained := make(chan struct{})
	go func() {
		// Read to the end without t: the stream may be cut by the shutdown.
		defer close(drained)
		defer streaming.Close()
		for {
			if _, err := streaming.Next(); err != nil {
				return
			}
		}
	}()
	defer func() { <-drained }()
	began := time.Now()
	srv.Stop()
	if took := time.Since(began); took > srv.Config.ShutdownTimeout {
		t.Fatalf("shutdown with a full disk took %s, budget %s", took, srv.Config.ShutdownTimeout)
	} else {
		t.Logf("shutdown with a full disk took %s", took.Round(time.Millisecond))
	}
}
