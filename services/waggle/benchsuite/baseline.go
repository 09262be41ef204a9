package benchsuite

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/waggle-os/core/libs/sse"
)

// echoText is the echo-mode reply for message (reference §1.8), so the
// baseline streams the same bytes the server does.
func echoText(message string) string {
	return "**Waggle is running in local mode** (no LLM proxy connected).\n\nYour message: \"" + message +
		"\"\n\nTo enable AI responses, configure an API key in Settings > API Keys."
}

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
