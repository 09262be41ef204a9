package app

import (
	"context"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// startTracing installs an OpenTelemetry tracer provider exporting spans
// over OTLP/HTTP to endpoint (e.g. http://otel-collector:4318). Without an
// endpoint nothing is installed: spans stay no-ops, while W3C trace context
// still flows through HTTP and NATS headers.
func startTracing(ctx context.Context, endpoint string, targets []string) (func(context.Context) error, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--otlp-endpoint %q: want an http(s) URL such as http://collector:4318", endpoint)
	}
	// Like OTEL_EXPORTER_OTLP_ENDPOINT: a base URL gets the signal path.
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.String())}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res := resource.NewSchemaless(semconv.ServiceName("waggle"), semconv.ServiceInstanceID(fmt.Sprint(targets)))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}
