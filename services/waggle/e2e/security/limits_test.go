package security

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

// limitsFrames lists the personal mind's frames.
func limitsFrames(t *testing.T, p *waggletest.Proc) []struct {
	ID      string `json:"id"`
	Content string `json:"content"`
} {
	t.Helper()
	resp := p.Do(t, http.MethodGet, "/api/memory/frames?limit=100", nil)
	defer resp.Body.Close()
	var out struct {
		Results []struct {
			ID      string `json:"id"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list frames: status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Results
}

// A 1 MiB memory frame full of script elements (the shape that made the
// old sanitiser rescan the text once per element: tens of CPU-seconds, a
// 500 after the bus timeout, and the frame stored anyway) is saved at once
// and exactly once.
func TestLimitsOneMebibyteFrameIsSavedOnceAndQuickly(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin)
	const unit = "note <script>x</script> "
	content := strings.Repeat(unit, (1<<20-64)/len(unit))
	body := `{"content":"` + content + `"}`
	if len(body) > 1<<20 {
		t.Fatalf("body of %d bytes is over the 1 MiB limit", len(body))
	}
	began := time.Now()
	resp := p.Do(t, http.MethodPost, "/api/memory/frames", body)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(began)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("1 MiB frame: status %d after %v: %s", resp.StatusCode, took, data)
	}
	// Generous: the old sanitiser needed tens of seconds; the bus gives
	// up after 10.
	if took > 5*time.Second {
		t.Errorf("1 MiB frame took %v", took)
	}
	var saved struct {
		Saved   bool   `json:"saved"`
		FrameID string `json:"frameId"`
	}
	if err := json.Unmarshal(data, &saved); err != nil || !saved.Saved {
		t.Fatalf("reply %s (%v)", data, err)
	}
	frames := limitsFrames(t, p)
	if len(frames) != 1 || frames[0].ID != saved.FrameID {
		t.Fatalf("stored frames %d, want exactly the one saved (%s)", len(frames), saved.FrameID)
	}
	if strings.Contains(frames[0].Content, "<script") || !strings.HasPrefix(frames[0].Content, "note  note") {
		t.Errorf("stored content not sanitised: %.80q…", frames[0].Content)
	}
}

// Other local users must not read chats, memories or API keys: after a
// `waggle serve` has run a chat, saved a memory and read its config,
// every directory under the data dir is 0700 and every file 0600 — also
// when the data dir was left 0755 with 0644 files (by an older version,
// a copy, a restore).
func TestLimitsDataDirIsPrivateToItsOwner(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, d := range []string{dir, filepath.Join(dir, "old")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil { // whatever the test's umask
			t.Fatal(err)
		}
	}
	for name, data := range map[string]string{
		"config.json":  `{"apiKey":"sk-secret","autoSave":false}`,
		"old/chat.txt": "an old chat",
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	p := waggletest.StartProc(t, waggleBin, waggletest.ProcDataDir(dir))
	chat := p.Do(t, http.MethodPost, "/api/chat", map[string]any{"message": "hello", "workspace": "ws-private", "session": "s1"})
	if chat.StatusCode != http.StatusOK {
		t.Fatalf("chat: status %d", chat.StatusCode)
	}
	if evs := waggletest.NewStream(chat).All(t); len(evs) == 0 {
		t.Fatal("chat: no events")
	}
	resp := p.Do(t, http.MethodPost, "/api/memory/frames", map[string]any{"content": "my bank PIN hint", "workspace": "ws-private"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("save memory: status %d", resp.StatusCode)
	}
	resp = p.Do(t, http.MethodPost, "/api/memory/frames", map[string]any{"content": "a personal note"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("save personal memory: status %d", resp.StatusCode)
	}
	p.Stop(t) // every write done and synced

	var files, dirs int
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		switch perm := info.Mode().Perm(); {
		case d.Type()&fs.ModeSymlink != 0:
		case d.IsDir():
			dirs++
			if perm != 0o700 {
				t.Errorf("dir %s is %#o, want 0700", rel, perm)
			}
		default:
			files++
			if perm != 0o600 {
				t.Errorf("file %s is %#o, want 0600", rel, perm)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk saw what the process wrote: sessions, memories, the NATS
	// store, besides the planted files.
	if files < 5 || dirs < 4 {
		t.Errorf("walked only %d files and %d dirs: did the process write its data here?", files, dirs)
	}
}
