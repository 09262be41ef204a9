package gateway

import (
	"crypto/subtle"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/trace"

	"net/http"
	"runtime/debug"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"

	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

// metrics counts requests by route pattern (never the raw path: ids would
// explode the label set) and times the JSON routes.
func metrics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		// The request's span (W3C traceparent from the client, if any) is
		// carried into every bus request the handler makes.
		ctx, span := telemetry.Tracer().Start(telemetry.ExtractHTTP(r.Context(), r.Header), r.Method,
			trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		route := "unmatched"
		if rc := chi.RouteContext(ctx); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		span.SetName(r.Method + " " + route)
		telemetry.HTTPRequests.WithLabelValues(route, r.Method, strconv.Itoa(sw.status)).Inc()
		if !sw.streamed {
			telemetry.HTTPDuration.WithLabelValues(route, r.Method).Observe(time.Since(began).Seconds())
		}
	})
}

// statusWriter records the status and whether the response was an event
// stream. It keeps Flush and Unwrap reachable for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status   int
	streamed bool
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.streamed = w.Header().Get("Content-Type") == "text/event-stream"
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recoverer turns a handler panic into a logged 500 with no detail.
func (s *Service) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				respond.Fail(w, protocol.Internal, "", "Internal server error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline' https://fonts.googleapis.com; " +
	"font-src 'self' https://fonts.gstatic.com; img-src 'self' data: blob:; " +
	"connect-src 'self' http://127.0.0.1:* ws://127.0.0.1:* https://api.anthropic.com https://generativelanguage.googleapis.com; frame-ancestors 'none'"

// securityHeaders sets the original's security headers (reference §0.2).
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-XSS-Protection", "1; mode=block")
		h.Set("Referrer-Policy", "strict-origin-when-cross-origin")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		next.ServeHTTP(w, r)
	})
}

const allowedMethods = "GET,HEAD,PUT,PATCH,POST,DELETE"

// cors answers preflights and marks allowed origins on every response.
// Origins match exactly (the original's prefix match accepted
// http://localhost:1420.evil.com); originCheck has already refused a
// state-changing request from any other origin.
func (s *Service) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		allowed := s.originAllowed(origin, r.Host)
		if r.Method == http.MethodOptions {
			if origin == "" || r.Header.Get("Access-Control-Request-Method") == "" {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte("Invalid Preflight Request"))
				return
			}
			if !allowed {
				respond.Fail(w, protocol.Forbidden, "", "CORS: origin not allowed")
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Methods", allowedMethods)
			if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
				h.Set("Access-Control-Allow-Headers", req)
			}
			h.Set("Access-Control-Max-Age", "600")
			h.Add("Vary", "Origin")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allowed {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Expose-Headers", "X-Waggle-Turn-Id")
		}
		w.Header().Add("Vary", "Origin")
		next.ServeHTTP(w, r)
	})
}

// streamOrigin picks the Access-Control-Allow-Origin of an event stream the
// way the original's validateOrigin does: the request's origin when it is
// allowed, else the first allowed origin.
func (s *Service) streamOrigin(r *http.Request) string {
	origin := r.Header.Get("Origin")
	if s.originAllowed(origin, r.Host) {
		return origin
	}
	if len(s.origins) == 0 {
		return ""
	}
	return s.origins[0]
}

// auth is local mode's desktop trust (reference §0.2): on a loopback-only
// listener, direct loopback clients pass; anyone else needs the bearer
// token /health reports to direct loopback clients. A server bound beyond
// loopback asks every request but /health (and preflights) for the token,
// loopback callers included: one may be a reverse proxy relaying anyone.
func (s *Service) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions || r.URL.Path == "/health" || (!s.beyondLoopback && directLoopback(r)) {
			next.ServeHTTP(w, r)
			return
		}
		h := r.Header.Get("Authorization")
		if h == "" {
			respond.Fail(w, protocol.Unauthenticated, protocol.CodeMissingToken, "Unauthorized")
			return
		}
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) != 1 {
			respond.Fail(w, protocol.Unauthenticated, protocol.CodeInvalidToken, "Unauthorized")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// directLoopback reports whether r comes from this machine itself: a
// loopback peer that does not say it forwards someone else's request (a
// local reverse proxy adds Forwarded or X-Forwarded-For).
func directLoopback(r *http.Request) bool { return input.DirectLoopback(r) }
