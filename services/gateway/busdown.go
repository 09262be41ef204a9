package gateway

import (
	"net/http"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

// busCheck answers 503 BUS_UNAVAILABLE at once while this gateway has lost
// its NATS server. Otherwise a request would wait in nats.go's reconnect
// buffer for the whole request timeout and end as a bare 500; a client
// (or load balancer, which also sees /health turn 503) can retry instead.
// /health and /metrics still answer.
func (s *Service) busCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodOptions && r.URL.Path != "/health" && r.URL.Path != "/metrics" && !s.nc.IsConnected() {
			respond.Error(w, s.log, protocol.ErrBusUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}
