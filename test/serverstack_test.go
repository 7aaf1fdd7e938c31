package test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/shed"
	"github.com/veerhq/veer/tier"
)

// A service composed the way the gateway will compose it: body guard →
// flow control per tenant → criticality-aware shedding → the mux. Each
// layer rejects with its own wire form, and the client classifies each
// rejection into the outcome the layer meant.
func TestServerStackRejectsEachWayOverRealHTTP(t *testing.T) {
	reg := prometheus.NewRegistry()
	mclk := clock.NewManual(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	lim, err := limit.New(limit.Config{Dimensions: []limit.Dimension{{
		Name:      "tenant",
		Overrides: map[string]limit.Limits{"acme": {Rate: 1, Burst: 2}},
	}}}, limit.Options{Clock: mclk, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	s, err := shed.New(shed.Config{
		MaxQueue:   1,
		Registerer: reg,
		Logger:     obs.Discard,
		Endpoints:  []shed.EndpointConfig{{Name: "POST /trips", Limit: &shed.LimitConfig{Static: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	started := make(chan string, 4)
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /trips", func(w http.ResponseWriter, r *http.Request) {
		started <- r.Header.Get("X-Request")
		<-release
		io.WriteString(w, "trip")
	})
	mux.HandleFunc("GET /ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	handler := limit.BodyLimit(1024, reg)(limit.Middleware(lim, limit.HeaderKeys("X-Tenant"))(s.Middleware(mux)))
	srv := httptest.NewServer(handler)
	defer srv.Close()

	client := &http.Client{Transport: &tier.Transport{Self: "rider-app"}}
	do := func(ctx context.Context, method, path, tenant, id string, body io.Reader) (outcome.Outcome, string) {
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, body)
		req.Header.Set("X-Tenant", tenant)
		req.Header.Set("X-Request", id)
		resp, err := client.Do(req)
		o := outcome.Classify(resp, err)
		if err != nil {
			return o, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return o, string(b)
	}
	critical := tier.WithTier(context.Background(), tier.Critical)
	sheddable := tier.WithTier(context.Background(), tier.Sheddable)

	// 1. Flow control: acme's burst of 2, then 429 with a Retry-After
	// computed from the limiter (1 req/s: the next token in 1s).
	for i := range 2 {
		if o, _ := do(critical, "GET", "/ok", "acme", "", nil); o.Kind != outcome.Success {
			t.Fatalf("acme request %d within burst: %v", i, o)
		}
	}
	o, body := do(critical, "GET", "/ok", "acme", "", nil)
	if o.Kind != outcome.Limited || o.RetryAfter != time.Second {
		t.Fatalf("acme over its rate: %v retry after %v; want limited, 1s", o, o.RetryAfter)
	}
	var rej outcome.Rejection
	if err := json.Unmarshal([]byte(body), &rej); err != nil || rej.Error != "limited" || !strings.Contains(rej.Reason, "tenant") {
		t.Fatalf("429 body %q does not name the dimension", body)
	}
	if o, _ := do(critical, "GET", "/ok", "globex", "", nil); o.Kind != outcome.Success {
		t.Fatalf("another tenant was limited: %v", o)
	}
	mclk.Advance(time.Second)
	if o, _ := do(critical, "GET", "/ok", "acme", "", nil); o.Kind != outcome.Success {
		t.Fatalf("acme after its Retry-After: %v", o)
	}

	// 2. Body guard: 413 for a declared oversized body, unread.
	if o, _ := do(critical, "POST", "/trips", "globex", "big", strings.NewReader(strings.Repeat("x", 4096))); o.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %v, want 413", o)
	}

	// 3. Shedding: the endpoint's one slot is busy with a critical trip; a
	// sheddable request waits in the one-place queue; a critical request
	// arriving at the full queue evicts it (lowest tier first) with 503.
	type result struct {
		id string
		o  outcome.Outcome
	}
	results := make(chan result, 3)
	send := func(ctx context.Context, id string) {
		go func() {
			o, _ := do(ctx, "POST", "/trips", "globex", id, strings.NewReader("{}"))
			results <- result{id, o}
		}()
	}
	send(critical, "first")
	if id := <-started; id != "first" {
		t.Fatalf("started %q", id)
	}
	send(sheddable, "sheddable")
	eventually(t, func() bool { return queued(s, "POST /trips") == 1 })
	send(critical, "second")
	r := <-results
	if r.id != "sheddable" || r.o.Kind != outcome.Overloaded || r.o.RetryAfter <= 0 {
		t.Fatalf("first result %s %v; want the sheddable request shed with 503 + Retry-After", r.id, r.o)
	}
	close(release)
	for range 2 {
		r := <-results
		if r.o.Kind != outcome.Success {
			t.Fatalf("critical request %s: %v", r.id, r.o)
		}
	}
	if id := <-started; id != "second" {
		t.Fatalf("second handler start %q", id)
	}
	if errs := obs.Lint(reg); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func queued(s *shed.Shedder, endpoint string) int {
	for _, st := range s.Stats() {
		if st.Endpoint == endpoint {
			return st.Queued
		}
	}
	return 0
}

// eventually polls cond until it holds, failing after a generous bound. It
// waits for a state, never for a fixed time.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
