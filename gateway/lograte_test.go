package gateway

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/internal/metrictest"
)

// TestRefusalLogRate: step table. At most max lines per second; the first
// line after a suppressed stretch reports how many were left out.
func TestRefusalLogRate(t *testing.T) {
	l := &logRate{max: 2}
	t0 := time.Unix(1000, 0)
	for i, st := range []struct {
		at         time.Duration
		ok         bool
		suppressed int
	}{
		{0, true, 0}, {10 * time.Millisecond, true, 0},
		{20 * time.Millisecond, false, 0}, {900 * time.Millisecond, false, 0}, {999 * time.Millisecond, false, 0},
		{time.Second, true, 3}, {time.Second + 1, true, 0}, {time.Second + 2, false, 0},
		{5 * time.Second, true, 1},
	} {
		ok, s := l.allow(t0.Add(st.at))
		if ok != st.ok || s != st.suppressed {
			t.Fatalf("step %d at %v: allow = %v, %d; want %v, %d", i, st.at, ok, s, st.ok, st.suppressed)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRefusalStormLogsBounded: 60 smuggling-shaped requests are all
// counted, but their log lines stay within the rate (10 a second; before,
// one line each).
func TestRefusalStormLogsBounded(t *testing.T) {
	a, _ := echoUpstream(t, "a")
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	g := startGatewayOpts(t, parseConfig(t, fill("routes: [{name: r, clusters: [{name: a}]}]\nclusters: [{name: a, backends: [{address: A}]}]\n", "A", a)),
		Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: reg, Gatherer: reg})
	start := time.Now()
	for range 60 {
		rawRequest(t, g.Addrs().Plain, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
	}
	secs := int(time.Since(start)/time.Second) + 2 // the windows the storm can span
	if n := metrictest.Sum(t, reg, "veer_gateway_guard_rejected_total", map[string]string{"guard": "framing"}); n != 60 {
		t.Fatalf("framing refusals counted %v, want 60", n)
	}
	if lines := strings.Count(logs.String(), "ambiguous framing"); lines == 0 || lines > MaxRefusalLogsPerSecond*secs {
		t.Fatalf("%d refusal log lines over at most %d s, want 1..%d", lines, secs, MaxRefusalLogsPerSecond*secs)
	}
}
