package gatewayotel_test

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/gateway/gatewayotel"
	"github.com/veerhq/veer/obs"
)

// A real OTLP/HTTP exporter posts to an in-test collector: the exported
// span carries the caller's trace id, the caller's span as parent, and the
// span id the backend saw as its parent.
func TestSpansExportedOverOTLP(t *testing.T) {
	var mu sync.Mutex
	var got []*coltrace.ExportTraceServiceRequest
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad export", 400)
			return
		}
		mu.Lock()
		got = append(got, &req)
		mu.Unlock()
	}))
	defer collector.Close()
	var seen string
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.Header.Get("Traceparent") }))
	defer be.Close()

	exp, err := gatewayotel.New(gatewayotel.Config{Endpoint: strings.TrimPrefix(collector.URL, "http://"), Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{
		Listen:   gateway.Listen{Addr: "off"},
		Routes:   []gateway.Route{{Name: "api", Clusters: []gateway.RouteCluster{{Name: "c"}}}},
		Clusters: []gateway.Cluster{{Name: "c", Backends: []gateway.Backend{{Address: be.Listener.Addr().String()}}}},
	}, gateway.Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry(), OnSpan: exp.OnSpan, SampleNewTraces: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	req := httptest.NewRequest(http.MethodGet, "http://example.com/x", nil)
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	g.ServeHTTP(httptest.NewRecorder(), req)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := exp.Close(ctx); err != nil { // flushes the batch to the collector
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || len(got[0].ResourceSpans) != 1 || len(got[0].ResourceSpans[0].ScopeSpans[0].Spans) != 1 {
		t.Fatalf("exports: %v", got)
	}
	s := got[0].ResourceSpans[0].ScopeSpans[0].Spans[0]
	if hex.EncodeToString(s.TraceId) != "4bf92f3577b34da6a3ce929d0e0e4736" || hex.EncodeToString(s.ParentSpanId) != "00f067aa0ba902b7" || s.Name != "api" {
		t.Errorf("span trace %x parent %x name %q", s.TraceId, s.ParentSpanId, s.Name)
	}
	if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + hex.EncodeToString(s.SpanId) + "-01"; seen != want {
		t.Errorf("backend saw traceparent %q, want %q (the exported span as its parent)", seen, want)
	}
}

// TestNewValidatesConfig: New refuses a config without a usable endpoint,
// naming the field, before it starts anything.
func TestNewValidatesConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  gatewayotel.Config
		want string // "" : valid
	}{
		{"no endpoint", gatewayotel.Config{}, "endpoint: required"},
		{"no port", gatewayotel.Config{Endpoint: "collector.test"}, `endpoint: "collector.test": want host:port`},
		{"a URL", gatewayotel.Config{Endpoint: "http://collector.test:4318/v1/traces"}, "endpoint:"},
		{"host:port", gatewayotel.Config{Endpoint: "127.0.0.1:4318", Insecure: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp, err := gatewayotel.New(tc.cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if err := exp.Close(context.Background()); err != nil {
					t.Fatalf("Close: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
			if !errors.As(err, new(*config.FieldError)) {
				t.Fatalf("New: %v is not a *config.FieldError", err)
			}
		})
	}
}
