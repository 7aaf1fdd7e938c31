package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

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

// TestStaleLoadOutlivesCaller: a stale-on-error load runs detached from the
// caller that started it. The caller gives up while the backend is slow;
// the load goes on. Before the fix the load wrote the caller's request state
// while the caller's access log entry read it (go test -race reported it in
// some runs; the entries below were wrong in every run: the caller that gave
// up logged the load's backend, the waiter logged no attempt). Now each
// request's entry says what reached that request: the caller that gave up
// made no attempt of its own, the waiter of the same load gets that load's
// attempt, cluster and backend, a fresh hit made no attempt.
func TestStaleLoadOutlivesCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var hits atomic.Int64
		srv := newPipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			<-release
			_, _ = io.WriteString(w, "token")
		}))
		logPath := filepath.Join(t.TempDir(), "access.log")
		cfg := parseConfig(t, fill(`
listen: {addr: "off"}
routes: [{name: token, clusters: [{name: auth}], stale_on_error: {ttl: 1h}}]
clusters: [{name: auth, backends: [{address: "pipe:80"}]}]
access_log: {path: LOG}
`, "LOG", logPath))
		g, err := New(cfg, Options{Logger: obsDiscard(), Registerer: prometheus.NewRegistry(), DialContext: srv.dial})
		if err != nil {
			t.Fatal(err)
		}
		serve := func(ctx context.Context, who string) *httptest.ResponseRecorder {
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://gw/a", nil)
			req.Header.Set("Authorization", "same")
			req.RemoteAddr = who
			w := httptest.NewRecorder()
			g.ServeHTTP(w, req)
			return w
		}
		// A starts the load and gives up while the backend holds it.
		ctxA, cancelA := context.WithCancel(context.Background())
		doneA := make(chan *httptest.ResponseRecorder)
		go func() { doneA <- serve(ctxA, "10.0.0.1:1") }()
		synctest.Wait()
		if hits.Load() != 1 {
			t.Fatalf("backend hits %d, want the load's 1", hits.Load())
		}
		cancelA()
		if w := <-doneA; w.Code != 499 {
			t.Fatalf("A: %d, want 499 (client gone)", w.Code)
		}
		// B waits on the same load (same URL and credentials).
		doneB := make(chan *httptest.ResponseRecorder)
		go func() { doneB <- serve(context.Background(), "10.0.0.2:1") }()
		synctest.Wait()
		close(release)
		if w := <-doneB; w.Code != 200 || w.Body.String() != "token" {
			t.Fatalf("B: %d %q, want the loaded token", w.Code, w.Body.String())
		}
		if w := serve(context.Background(), "10.0.0.3:1"); w.Code != 200 || w.Body.String() != "token" {
			t.Fatalf("fresh hit: %d %q", w.Code, w.Body.String())
		}
		if hits.Load() != 1 {
			t.Fatalf("backend hits %d, want 1 (B waited on A's load)", hits.Load())
		}
		_ = g.Close()
		type fields struct {
			Status   int
			Attempts int
			Cluster  string
			Backend  string
		}
		want := map[string]fields{
			"10.0.0.1:1": {499, 0, "", ""},            // A: gave up before the load answered
			"10.0.0.2:1": {200, 1, "auth", "pipe:80"}, // B: the shared load's attempt
			"10.0.0.3:1": {200, 0, "", ""},            // fresh from the cache
		}
		entries := readLog(t, logPath)
		if len(entries) != len(want) {
			t.Fatalf("%d access log entries, want %d: %v", len(entries), len(want), entries)
		}
		for _, e := range entries {
			got := fields{int(e["status"].(float64)), int(e["attempts"].(float64)), e["cluster"].(string), e["backend"].(string)}
			if w := want[e["remote"].(string)]; got != w {
				t.Errorf("%s: %+v, want %+v", e["remote"], got, w)
			}
		}
	})
}

// readLog reads a JSON access log.
func readLog(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}
