package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/llmprobe"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

type llmHealth struct {
	Provider  string `json:"provider"`
	Health    string `json:"health"`
	Detail    string `json:"detail,omitempty"`
	CheckedAt string `json:"checkedAt"`
	Reachable bool   `json:"reachable"`
	LastCheck string `json:"lastCheck"`
}

type healthResponse struct {
	Status    string    `json:"status"`
	Mode      string    `json:"mode"`
	Timestamp string    `json:"timestamp"`
	WSToken   string    `json:"wsToken,omitempty"`
	LLM       llmHealth `json:"llm"`
	Database  struct {
		Healthy bool `json:"healthy"`
	} `json:"database"`
	NATS struct {
		Connected bool `json:"connected"`
	} `json:"nats"`
	DefaultModel string `json:"defaultModel"`
	Offline      bool   `json:"offline"`
	// Storage is set while a store is full.
	Storage *storageHealth `json:"storage,omitempty"`
}

type storageHealth struct {
	Full   bool   `json:"full"`
	Source string `json:"source"`
	Reason string `json:"reason"`
	Since  string `json:"since,omitempty"`
}

// health is GET /health: 200 once every service of this process is ready
// and the bus is connected, 503 before (or while shutting down), and 503
// "degraded" with the store and reason while a store is full.
func (s *Service) health(w http.ResponseWriter, r *http.Request) {
	st := s.probe.Check(r.Context())
	resp := healthResponse{Status: "ok", Mode: s.cfg.Mode, Timestamp: protocol.Timestamp(time.Now())}
	if s.reportsToken(r) {
		// The desktop web client reads its bearer token here (reference §6.1).
		resp.WSToken = s.cfg.Token
	}
	resp.LLM = llmHealth{Provider: "openai-compatible", Health: "unavailable", Detail: st.Detail, Reachable: st.Reachable}
	if st.Reachable {
		resp.LLM.Health = "healthy"
	}
	var served bool
	resp.DefaultModel, served = s.defaultModel(r.Context(), st)
	if !served {
		resp.LLM.Health = "degraded"
		resp.LLM.Detail = fmt.Sprintf("the configured model %q is not served by the model server", resp.DefaultModel)
	}
	if !st.CheckedAt.IsZero() {
		resp.LLM.CheckedAt, resp.LLM.LastCheck = protocol.Timestamp(st.CheckedAt), protocol.Timestamp(st.CheckedAt)
	}
	resp.Offline = !st.Reachable
	resp.NATS.Connected = s.nc.IsConnected()
	resp.Database.Healthy = resp.NATS.Connected
	status := http.StatusOK
	if !s.ready() || !resp.NATS.Connected {
		resp.Status = "starting"
		if !resp.NATS.Connected {
			resp.Status = "unavailable"
		}
		status = http.StatusServiceUnavailable
	}
	if st, full := s.storage.watch.Full(); full && status == http.StatusOK {
		// Degraded: reads work, nothing new can be kept.
		resp.Status, status = "degraded", http.StatusServiceUnavailable
		// The report's own reason names paths: it is in the reporter's
		// log, not here.
		resp.Storage = &storageHealth{Full: true, Source: st.Source, Reason: "storage is full: the " + st.Source + " store is out of disk space"}
		if st.Since > 0 {
			resp.Storage.Since = protocol.Timestamp(time.UnixMilli(st.Since))
		}
	}
	respond.JSON(w, status, resp)
}

// defaultModel is the model a turn that names none uses, as the runners
// resolve it (config.json's defaultModel, else --model, else the agent
// default or the server's first model when it does not serve that), and
// whether the model server serves it: false only for a configured model
// that a reachable server does not list.
func (s *Service) defaultModel(ctx context.Context, st llmprobe.Status) (model string, served bool) {
	model = s.cfg.DefaultModel
	if m := s.settingsModel(ctx); m != "" {
		model = m
	}
	if model != "" {
		return model, !st.Reachable || st.Lists(model)
	}
	if st.Reachable && !st.Lists(protocol.DefaultAgentModel) {
		return st.Models[0], true
	}
	return protocol.DefaultAgentModel, true
}

// settingsModel is config.json's defaultModel as the session store (its
// owner) reads it; a store that does not answer within a second names
// none (/health must answer while the store is away).
func (s *Service) settingsModel(ctx context.Context) string {
	if !s.nc.IsConnected() {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rep, err := bus.Call(ctx, s.nc, protocol.GetSettings, protocol.Empty{})
	if err != nil {
		return ""
	}
	var c struct {
		DefaultModel string `json:"defaultModel"`
	}
	if json.Unmarshal(rep.Doc, &c) != nil {
		return ""
	}
	return c.DefaultModel
}

// reportsToken reports whether /health hands r the local-mode bearer
// token: only to a direct loopback client (anyone on the machine can read
// it anyway), never to a remote one or one relayed by a proxy, whatever
// the listen address; a remote client of a server bound beyond loopback
// is given the token by its operator.
func (s *Service) reportsToken(r *http.Request) bool {
	return s.cfg.Mode == "local" && directLoopback(r)
}
