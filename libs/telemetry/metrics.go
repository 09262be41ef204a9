// Package telemetry holds the process's Prometheus metrics: one registry
// per process, the metrics every service records, and the /metrics
// handler. Metrics are package-level so recording costs one atomic add and
// no service needs a handle threaded through it.
package telemetry

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is the process's metric registry (Go runtime and process
// collectors included).
var Registry = prometheus.NewRegistry()

var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// Metrics recorded by the services. Labels are low-cardinality by design:
// never a workspace, session or turn id.
var (
	// TurnsStarted counts turns taken by a runner, by path (echo, command, agent).
	TurnsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "waggle_turns_started_total", Help: "Chat turns started by this runner, by path.",
	}, []string{"path"})
	// TurnsFinished counts turns by outcome (done, error, cancelled).
	TurnsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "waggle_turns_finished_total", Help: "Chat turns finished by this runner, by outcome.",
	}, []string{"outcome"})
	// TurnDuration is a turn's wall time from start to its terminal event.
	TurnDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "waggle_turn_duration_seconds", Help: "Turn duration from start to terminal event.", Buckets: latencyBuckets,
	}, []string{"path"})
	// TimeToFirstToken is runner-side: turn start to the first token published.
	TimeToFirstToken = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "waggle_time_to_first_token_seconds", Help: "Turn start to first token event published (runner side).", Buckets: latencyBuckets,
	})
	// TokensPublished counts token events published.
	TokensPublished = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "waggle_token_events_total", Help: "Token events published by this runner.",
	})
	// ToolCalls counts tool calls by tool and status (success, error, denied).
	ToolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "waggle_tool_calls_total", Help: "Tool calls by tool and status.",
	}, []string{"tool", "status"})
	// Approvals counts approval decisions (approved, denied, timeout, grant, auto).
	Approvals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "waggle_approvals_total", Help: "Tool approval outcomes.",
	}, []string{"outcome"})
	// StreamsOpen is the number of SSE streams this gateway is relaying.
	StreamsOpen = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "waggle_streams_open", Help: "SSE event streams currently open on this gateway.",
	})
	// RelayEvents counts events written to SSE clients.
	RelayEvents = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "waggle_relay_events_total", Help: "Events relayed to SSE clients by this gateway.",
	})
	// RelayCatchUps counts relays the live path dropped for lagging, which
	// then read the turn from the stream.
	RelayCatchUps = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "waggle_relay_catchups_total", Help: "Lagging SSE clients moved from the live path to a stream read.",
	})
	// RelayGaps counts clients told that events they had not read were
	// discarded (they fell behind the turn stream's kept window).
	RelayGaps = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "waggle_relay_gaps_total", Help: "SSE clients sent stream_gap: events discarded before they read them.",
	})
	// RelayLag is the time from an event being stored in the stream to its
	// write to the client.
	RelayLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "waggle_relay_lag_seconds", Help: "Stream store time to SSE write, per event.", Buckets: latencyBuckets,
	})
	// HTTPRequests counts gateway requests by route pattern, method and status.
	HTTPRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "waggle_http_requests_total", Help: "HTTP requests by route, method and status.",
	}, []string{"route", "method", "code"})
	// HTTPDuration is the handler time of JSON routes (streams excluded).
	HTTPDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "waggle_http_request_duration_seconds", Help: "HTTP handler duration by route (streams excluded).", Buckets: latencyBuckets,
	}, []string{"route", "method"})
	// BusRequests counts bus requests served by endpoint and outcome (ok, error class).
	BusRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "waggle_bus_requests_total", Help: "Bus requests served, by service endpoint and status.",
	}, []string{"service", "endpoint", "status"})
	// BusDuration is the handler time of bus endpoints.
	BusDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "waggle_bus_request_duration_seconds", Help: "Bus endpoint handler duration.", Buckets: latencyBuckets,
	}, []string{"service", "endpoint"})
	// BusErrors counts failed bus operations by kind (request, publish, nats).
	BusErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "waggle_bus_errors_total", Help: "Failed bus operations (requests, publishes, connection errors).",
	}, []string{"kind"})
	// StoreErrors counts session-store failures by operation.
	StoreErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "waggle_store_errors_total", Help: "Session-store failures by operation.",
	}, []string{"op"})
)

func init() {
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		TurnsStarted, TurnsFinished, TurnDuration, TimeToFirstToken, TokensPublished, ToolCalls, Approvals,
		StreamsOpen, RelayEvents, RelayCatchUps, RelayGaps, RelayLag, HTTPRequests, HTTPDuration,
		BusRequests, BusDuration, BusErrors, StoreErrors,
	)
}

// Handler serves the registry in the Prometheus text format.
func Handler() http.Handler {
	return promhttp.HandlerFor(Registry, promhttp.HandlerOpts{Registry: Registry})
}
