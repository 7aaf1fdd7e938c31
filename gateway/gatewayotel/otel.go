// Package gatewayotel exports the gateway's spans over OTLP/HTTP with the
// OpenTelemetry SDK. It is a sub-package so that package gateway does not
// link OpenTelemetry; cmd/veer wires it when the config names an endpoint.
//
// Each request's span keeps the ids the gateway put on the wire: its trace
// id, the span id it sent upstream as the parent, and the caller's span as
// its own parent, so an exported trace joins the caller's and the
// backends' spans.
//
// Contract: New validates its Config (Endpoint host:port, required) and
// fails with a config.Field error naming the field; it does not contact the
// collector. OnSpan never blocks.
//
// Failure mode: spans wait in the SDK's batch queue (2048); when the
// collector is slow or down the queue drops spans, the request path never
// waits. Close flushes what is queued, within its context.
package gatewayotel

import (
	"cmp"
	"context"
	"net"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
)

// Exporter turns gateway spans into OTLP spans.
type Exporter struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// Config of the exporter (cmd/veer fills it from gateway.Tracing).
type Config struct {
	// Endpoint: host:port of the OTLP/HTTP collector (the path is
	// /v1/traces). Required.
	Endpoint string
	// Insecure: plain HTTP instead of HTTPS.
	Insecure bool
	// ServiceName: default DefaultServiceName.
	ServiceName string
}

// Defaults.
const (
	// DefaultServiceName is the service.name of the exported spans.
	DefaultServiceName = "veer-gateway"
	// exportTimeout bounds one export request.
	exportTimeout = 5 * time.Second
)

// Validate names the bad field: Endpoint is required, as host:port.
func (c Config) Validate() error {
	if c.Endpoint == "" {
		return config.Field("endpoint", "required: host:port of the OTLP/HTTP collector")
	}
	if _, _, err := net.SplitHostPort(c.Endpoint); err != nil {
		return config.Field("endpoint", "%q: want host:port", c.Endpoint)
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.ServiceName = cmp.Or(c.ServiceName, DefaultServiceName)
	return c
}

// New validates cfg and starts an exporter. Pass its OnSpan to
// gateway.Options (with SampleNewTraces: true) and Close it after the
// gateway.
func New(cfg Config) (*Exporter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(cfg.Endpoint), otlptracehttp.WithTimeout(exportTimeout)}
	if cfg.Insecure {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithIDGenerator(ids{}),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", cfg.ServiceName))),
	)
	return &Exporter{tp: tp, tracer: tp.Tracer("github.com/veerhq/veer/gateway")}, nil
}

// OnSpan records one gateway span; it does not block.
func (e *Exporter) OnSpan(s gateway.Span) {
	ctx := context.WithValue(context.Background(), idsKey{}, s)
	if s.ParentID != ([8]byte{}) {
		flags := trace.TraceFlags(0)
		if s.Sampled {
			flags = trace.FlagsSampled
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: s.TraceID, SpanID: s.ParentID, TraceFlags: flags, Remote: true,
		}))
	} else if !s.Sampled {
		return // a trace the gateway started unsampled
	}
	_, span := e.tracer.Start(ctx, s.Route, trace.WithTimestamp(s.Start), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", s.Method),
			attribute.String("server.address", s.Host),
			attribute.String("url.path", s.Path),
			attribute.Int("http.response.status_code", s.Status),
			attribute.String("veer.route", s.Route),
			attribute.String("veer.cluster", s.Cluster),
			attribute.String("veer.backend", s.Backend),
			attribute.Int("veer.attempts", s.Attempts),
		))
	if s.Status >= 500 {
		span.SetStatus(codes.Error, "")
	}
	span.End(trace.WithTimestamp(s.End))
}

// Close flushes queued spans and stops the exporter.
func (e *Exporter) Close(ctx context.Context) error { return e.tp.Shutdown(ctx) }

type idsKey struct{}

// ids hands the SDK the ids the gateway already put on the wire.
type ids struct{}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	s, _ := ctx.Value(idsKey{}).(gateway.Span)
	return s.TraceID, s.SpanID
}

func (ids) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	s, _ := ctx.Value(idsKey{}).(gateway.Span)
	return s.SpanID
}
