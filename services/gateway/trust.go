package gateway

import (
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/filesapi"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/routematch"
)

// The trust boundary's request rules (DESIGN §11), applied before any
// route so that no handler can forget them: after the Host check, a
// request that can change state must come from an allowed origin, and a
// request body must be JSON by its Content-Type. Browsers send a
// cross-origin POST without a preflight when its body is not typed
// (fetch with mode "no-cors" and a Blob, navigator.sendBeacon, a form), so
// neither CORS nor the JSON decoder stops such a request on its own.

// OriginNotAllowed is the error code of a state-changing request refused
// because it comes from a web page of another origin.
const OriginNotAllowed = "ORIGIN_NOT_ALLOWED"

// invalidMediaType is the error code (the original's, from Fastify) of a
// body that is not JSON by its Content-Type.
const invalidMediaType = "FST_ERR_CTP_INVALID_MEDIA_TYPE"

// safeMethod reports whether a request of this method never changes state
// (GETs have no side effects; OPTIONS is the CORS preflight).
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// originAllowed reports whether origin (an Origin header) may make
// state-changing requests and read answers: the server's own origin (its
// host:port is the request's Host, which passed the Host check; http, or
// https behind a TLS-terminating proxy) or one of s.origins. "null" (a
// sandboxed frame, a data: URL, a file) is foreign.
func (s *Service) originAllowed(origin, host string) bool {
	if origin == "" {
		return false
	}
	o := normalizeOrigin(origin)
	for _, a := range s.origins {
		if o == a {
			return true
		}
	}
	return input.SameOrigin(o, host)
}

// normalizeOrigin is an origin as browsers serialise it: lower case, no
// trailing slash.
func normalizeOrigin(o string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(o), "/"))
}

// originCheck refuses a state-changing request from a web page of another
// origin: its Origin is present and not allowed, or (no Origin) the
// browser marks it Sec-Fetch-Site: cross-site. An allowed Origin wins over
// Sec-Fetch-Site: the desktop app's webview calls the server cross-site.
// Requests without either header (curl, scripts, waggle chat) pass: they
// do not come from a page.
func (s *Service) originCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if safeMethod(r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		origin, hasOrigin := r.Header["Origin"]
		var refused bool
		if hasOrigin {
			refused = len(origin) != 1 || !s.originAllowed(origin[0], r.Host)
		} else {
			refused = strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site")
		}
		if refused {
			s.log.Warn("request refused: cross-origin (add the page's origin with --allowed-origins if it is trusted)",
				"origin", r.Header.Get("Origin"), "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			respond.Fail(w, protocol.Forbidden, OriginNotAllowed, "Cross-origin request refused")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// jsonBody refuses, on every method but GET, HEAD and OPTIONS, a request
// whose Content-Type is not JSON (application/json or any +json type), or
// that carries a body and no Content-Type. The one exception is the file
// upload route, which also takes multipart/form-data under a stricter
// origin rule (formFromOwnPage). A request with no body and no
// Content-Type (curl -X POST) passes; an empty body with the JSON type is
// read as {} by the handlers (DESIGN §9). The rule is what makes a
// browser's cross-origin POST need a CORS preflight.
func (s *Service) jsonBody(next http.Handler) http.Handler {
	// Fastify's shape, as the original's body parser answered.
	unsupported := func(w http.ResponseWriter, what string) {
		respond.Error(w, s.log, &respond.RequestError{Kind: protocol.UnsupportedMedia, Code: invalidMediaType, Message: "Unsupported Media Type: " + what})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if safeMethod(r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		ct := r.Header.Get("Content-Type")
		if ct == "" {
			if r.ContentLength != 0 { // -1: chunked, of unknown length
				unsupported(w, "a request body must be application/json")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		mt, _, err := mime.ParseMediaType(ct)
		if err == nil && mt == "multipart/form-data" && formRoute(r) {
			if !s.formFromOwnPage(r) {
				s.log.Warn("form upload refused: not from an allowed page", "method", r.Method, "path", r.URL.Path,
					"sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "remote", r.RemoteAddr)
				respond.Fail(w, protocol.Forbidden, OriginNotAllowed, "Cross-origin request refused")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			unsupported(w, mediaTypeForMessage(mt))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// formRoute reports whether r is for the one route that also takes
// multipart/form-data: the workspace file upload, which the original app
// sends as a form (filesapi.FormRoute).
func formRoute(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	pattern, _ := routematch.Match(r)
	return pattern == filesapi.FormRoute
}

// formFromOwnPage is the stricter origin rule of a form body. A form is a
// body browsers send cross-origin without a CORS preflight, so the JSON
// type cannot be what keeps another page out: the request must carry an
// allowed Origin (originCheck has refused any other), or no Origin and a
// Sec-Fetch-Site that says it is not from another site's page ("none",
// "same-origin", or absent: not a browser). Every current browser sends
// Origin on a POST; "same-site" without one (another port of this host)
// is refused too.
func (s *Service) formFromOwnPage(r *http.Request) bool {
	if _, ok := r.Header["Origin"]; ok {
		return true // checked by originCheck, which runs first
	}
	switch strings.ToLower(r.Header.Get("Sec-Fetch-Site")) {
	case "", "none", "same-origin":
		return true
	}
	return false
}

// mediaTypeForMessage is the parsed media type for the error message, cut
// short: it is the client's text.
func mediaTypeForMessage(mt string) string {
	if mt == "" {
		return "unparsable Content-Type"
	}
	if len(mt) > 100 {
		return mt[:100]
	}
	return mt
}

// bodyDeadline bounds the read of a request body by BodyReadTimeout: a
// client that sends its headers and then stalls the body is cut off
// instead of holding a connection and a handler for ever. The deadline is
// on the connection and is lifted once the body has been read, so the
// response (an event stream) is not bounded; it is not http.Server's
// ReadTimeout, which would also end the server's watch for a client
// that hangs up during a long stream.
func (s *Service) bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout)); err != nil {
			// The writer has no connection deadline (a test recorder):
			// nothing to bound.
			next.ServeHTTP(w, r)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the body's read deadline when the body is read to its
// end. (net/http clears it too when it starts watching for the client
// hanging up; this does not rely on that.)
type deadlineBody struct {
	io.ReadCloser
	lift   func()
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.lifted {
		b.lifted = true
		b.lift()
	}
	return n, err
}
