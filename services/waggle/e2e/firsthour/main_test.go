// Package firsthour follows the README as a newcomer does, with real
// `waggle serve` processes: a model server that is not the default one
// (Ollama), relative paths, a fresh team server. Each test is one trap of
// the first hour that must not stop anyone.
package firsthour

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

var waggleBin string

func TestMain(m *testing.M) {
	os.Exit(waggletest.RunWithBinary(m, &waggleBin))
}

// health is the part of GET /health these tests read.
type health struct {
	DefaultModel string `json:"defaultModel"`
	LLM          struct {
		Health string `json:"health"`
		Detail string `json:"detail"`
	} `json:"llm"`
}

func getHealth(t *testing.T, p *waggletest.Proc) health {
	t.Helper()
	resp := p.Do(t, http.MethodGet, "/health", nil)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var h health
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatalf("health %q: %v", data, err)
	}
	return h
}

// chat sends one message and returns the turn's events.
func chat(t *testing.T, p *waggletest.Proc, message string) []waggletest.Event {
	t.Helper()
	resp := p.Do(t, http.MethodPost, "/api/chat", map[string]any{"message": message, "workspace": "default", "session": "s1"})
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("chat: %d %s", resp.StatusCode, data)
	}
	return waggletest.NewStream(resp).All(t)
}
