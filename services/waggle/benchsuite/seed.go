package benchsuite

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// BenchWorkspace is the workspace the seeded sessions live in.
const BenchWorkspace = "bench"

// NeedleEvery is how often a seeded session mentions the search needle.
const NeedleEvery = 100

// Needle is a word only every NeedleEvery-th seeded session contains.
const Needle = "quasarneedle"

// SeedSessions writes workspace ws with n session files into dataDir, in the JSONL format of docs/architecture.md: a meta line, then
// four messages (user, assistant, user, assistant) with timestamps.
func SeedSessions(dataDir, ws string, n int) error {
	wsDir := filepath.Join(dataDir, "workspaces", ws)
	dir := filepath.Join(wsDir, "sessions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("benchsuite: seed: %w", err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	meta, _ := json.Marshal(map[string]string{"id": ws, "name": "Bench " + ws, "created": protocol.Timestamp(base)})
	if err := os.WriteFile(filepath.Join(wsDir, "workspace.json"), meta, 0o600); err != nil {
		return fmt.Errorf("benchsuite: seed workspace: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range n {
		buf.Reset()
		at := base.Add(time.Duration(i) * time.Minute)
		_ = enc.Encode(map[string]any{"type": "meta", "title": nil, "created": protocol.Timestamp(at)})
		topic := fmt.Sprintf("topic %d about deployments, budgets and release notes", i)
		if i%NeedleEvery == 0 {
			topic += " with the " + Needle
		}
		msgs := []struct{ role, content string }{
			{"user", "Can you summarise " + topic + "?"},
			{"assistant", "Here is a summary of " + topic + ": the plan holds, two risks remain, and the owners agreed on dates."},
			{"user", "Thanks. What should I do next?"},
			{"assistant", "Review the open risks, confirm the dates with the owners and write the release note."},
		}
		for j, m := range msgs {
			_ = enc.Encode(map[string]string{"role": m.role, "content": m.content, "timestamp": protocol.Timestamp(at.Add(time.Duration(j) * time.Second))})
		}
		name := filepath.Join(dir, fmt.Sprintf("s%05d.jsonl", i))
		if err := os.WriteFile(name, buf.Bytes(), 0o600); err != nil {
			return fmt.Errorf("benchsuite: seed session %d: %w", i, err)
		}
	}
	return nil
}

// scanSessions is the baseline of listing and search: read every session
// file of workspace ws from disk, look at each line (the meta line and
// the last timestamp for a listing) and count the files containing term
// (when not empty). It is the least any implementation must do.
func scanSessions(dataDir, ws, term string) (files, hits int, err error) {
	dir := filepath.Join(dataDir, "workspaces", ws, "sessions")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	needle := []byte(term)
	for _, e := range entries {
		// The server may rewrite a file beside the scan (temp file, then
		// rename): only session files count, and one that vanished is skipped.
		if !strings.HasSuffix(e.Name(), ".jsonl") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		files++
		sc := bufio.NewScanner(bytes.NewReader(data))
		found := false
		for sc.Scan() {
			if term != "" && !found && bytes.Contains(sc.Bytes(), needle) {
				found = true
			}
		}
		if found {
			hits++
		}
	}
	return files, hits, nil
}
