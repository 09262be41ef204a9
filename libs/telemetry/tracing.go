package telemetry

import (
	"context"
	"net/http"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName names the spans Waggle creates.
const TracerName = "github.com/waggle-os/core"

// propagator carries W3C trace context (traceparent, tracestate) across
// HTTP and NATS headers. It is fixed rather than the global one so trace
// context flows even when no tracer provider is installed (the default:
// spans are no-ops, but an incoming traceparent still reaches every
// service's logs and, once an exporter is on, its spans).
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Tracer returns the process's tracer (a no-op until the composition root
// installs a provider).
func Tracer() trace.Tracer { return otel.Tracer(TracerName) }

// InjectNATS writes ctx's trace context into a NATS message's headers.
func InjectNATS(ctx context.Context, m *nats.Msg) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(m.Header))
}

// ExtractNATS returns ctx carrying the trace context of a NATS message.
func ExtractNATS(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// ExtractHTTP returns ctx carrying the trace context of an HTTP request.
func ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}
