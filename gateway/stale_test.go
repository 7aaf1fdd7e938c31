package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestStaleOnError(t *testing.T) {
	var down atomic.Bool
	var calls atomic.Int64
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if down.Load() {
			http.Error(w, "auth down", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "token-for-"+r.Header.Get("Authorization"))
	}))
	defer auth.Close()
	_, base := startGateway(t, fill(`
routes: [{name: token, clusters: [{name: auth}], stale_on_error: {ttl: 1ns, max_stale: 24h, error_backoff: 1ns}}]
clusters: [{name: auth, backends: [{address: A}], outlier: {consecutive_errors: 1000}}]
retry: {disabled: true}
`, "A", auth.Listener.Addr().String()))
	cl := &http.Client{}
	resp, body := get(t, cl, base+"/token", "Authorization", "alice")
	if resp.StatusCode != 200 || body != "token-for-alice" {
		t.Fatalf("fresh: %d %q", resp.StatusCode, body)
	}
	down.Store(true)
	resp, body = get(t, cl, base+"/token", "Authorization", "alice")
	if resp.StatusCode != 200 || body != "token-for-alice" || resp.Header.Get("Warning") == "" {
		t.Fatalf("auth down: %d %q warning %q, want the stale token marked stale", resp.StatusCode, body, resp.Header.Get("Warning"))
	}
	// another caller's credentials never get alice's token
	resp, _ = get(t, cl, base+"/token", "Authorization", "bob")
	if resp.StatusCode != 503 {
		t.Fatalf("bob while auth is down: %d, want the upstream 503 relayed", resp.StatusCode)
	}
	if calls.Load() != 3 {
		t.Errorf("auth called %d times, want 3 (each load reached it)", calls.Load())
	}
}

// blockingWriter blocks every write until released.
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	b.once.Do(func() { close(b.entered) })
	<-b.release
	return len(p), nil
}

func TestAccessLogNeverBlocks(t *testing.T) {
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total"})
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	a := startAccessLog(w, nil, 4, 1, dropped)
	a.submit(logEntry{method: "GET"})
	<-w.entered    // the worker is stuck writing the first entry
	for range 99 { // the request path: returns although nothing more is written
		a.submit(logEntry{method: "GET"})
	}
	// one entry is held by the blocked worker, four wait in the queue
	var m dto.Metric
	_ = dropped.Write(&m)
	if d := m.GetCounter().GetValue(); d != 95 {
		t.Errorf("dropped %v, want 95", d)
	}
	close(w.release)
	a.close()
}
