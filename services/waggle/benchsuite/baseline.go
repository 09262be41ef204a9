package benchsuite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/sse"
)

// echoText is the echo-mode reply for message (reference §1.8), so the
// baseline streams the same bytes the server does.
func echoText(message string) string { return protocol.EchoText(message) }

// startEchoBaseline serves POST /api/chat as a bare net/http handler that
// streams the echo reply with libs/sse (one write and flush per event) and
// a done event, with none of the bus, runner or store in between: the
// floor an echo turn over HTTP on this machine can reach.
func startEchoBaseline() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Message string `json:"message"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := sse.Start(w, nil)
		if err != nil {
			return
		}
		text := echoText(body.Message)
		var id uint64
		for _, p := range strings.Split(text, " ") {
			id++
			data, _ := json.Marshal(map[string]string{"content": p + " "})
			if out.Event(id, "token", data) != nil {
				return
			}
		}
		done, _ := json.Marshal(map[string]any{"content": text, "toolsUsed": []string{}})
		_ = out.Event(id+1, "done", done)
	}))
}

// turnBaseline is the floor of a durable model turn over HTTP on this
// machine: a bare net/http handler that appends the user message to the
// session's JSONL file and fsyncs it, asks the model stub for the answer
// and streams its text as the same token events, appends the assistant
// message and fsyncs it, then sends done. No bus, runner or store.
type turnBaseline struct {
	*httptest.Server
	dir    string
	llmURL string
	model  *http.Client

	mu    sync.Mutex
	files map[string]*os.File
}

// startTurnBaseline serves POST /api/chat with session files in dir and
// the model at llmURL.
func startTurnBaseline(dir, llmURL string) (*turnBaseline, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("benchsuite: turn baseline dir: %w", err)
	}
	b := &turnBaseline{dir: dir, llmURL: llmURL, model: newClient(64), files: map[string]*os.File{}}
	b.Server = httptest.NewServer(http.HandlerFunc(b.serve))
	return b, nil
}

// Close stops the handler and closes the session files.
func (b *turnBaseline) Close() {
	b.Server.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range b.files {
		f.Close()
	}
}

// appendMessage appends one message line to the session's file and
// fsyncs it. The file stays open between turns: the least a store can do.
func (b *turnBaseline) appendMessage(session, role, content string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.files[session]
	if f == nil {
		var err error
		f, err = os.OpenFile(filepath.Join(b.dir, session+".jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		b.files[session] = f
	}
	line, _ := json.Marshal(map[string]string{"role": role, "content": content, "timestamp": protocol.Timestamp(time.Now())})
	if _, err := f.Write(append(line, '\n')); err != nil {
		return err
	}
	return f.Sync()
}

func (b *turnBaseline) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Message string `json:"message"`
		Session string `json:"session"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Session == "" || strings.ContainsAny(body.Session, `/\.`) {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if err := b.appendMessage(body.Session, "user", body.Message); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req, _ := json.Marshal(map[string]any{
		"model": "bench", "stream": true,
		"messages": []map[string]string{{"role": "system", "content": "bench"}, {"role": "user", "content": body.Message}},
	})
	mreq, err := http.NewRequestWithContext(r.Context(), http.MethodPost, b.llmURL+"/chat/completions", bytes.NewReader(req))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	mreq.Header.Set("Content-Type", "application/json")
	resp, err := b.model.Do(mreq)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, err := sse.Start(w, nil)
	if err != nil {
		return
	}
	var reply strings.Builder
	var id uint64
	lines := newLineReader(resp.Body)
	for {
		line, err := lines.next()
		if err != nil {
			return
		}
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal(data, &chunk) != nil || len(chunk.Choices) == 0 || chunk.Choices[0].Delta.Content == "" {
			continue
		}
		text := chunk.Choices[0].Delta.Content
		reply.WriteString(text)
		id++
		ev, _ := json.Marshal(map[string]string{"content": text})
		if out.Event(id, "token", ev) != nil {
			return
		}
	}
	if err := b.appendMessage(body.Session, "assistant", reply.String()); err != nil {
		msg, _ := json.Marshal(map[string]string{"message": "store failed"})
		_ = out.Event(id+1, "error", msg)
		return
	}
	done, _ := json.Marshal(map[string]any{"content": reply.String(), "toolsUsed": []string{}})
	_ = out.Event(id+1, "done", done)
}
