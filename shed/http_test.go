package shed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/veerhq/veer/internal/metrictest"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/tier"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newShedder(t testing.TB, c Config) (*Shedder, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c.Registerer = reg
	if c.Logger == nil {
		c.Logger = obs.Discard
	}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, reg
}

type reply struct {
	status int
	reason string
}

func get(t *testing.T, c *http.Client, url string, hdr map[string]string) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return reply{}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode}
	if resp.StatusCode == http.StatusServiceUnavailable {
		var rj outcome.Rejection
		if err := json.Unmarshal(body, &rj); err != nil {
			t.Errorf("503 body %q: %v", body, err)
		}
		if resp.Header.Get("Retry-After") != "1" {
			t.Errorf("503 without Retry-After: 1 (got %q)", resp.Header.Get("Retry-After"))
		}
		r.reason = rj.Reason
	}
	return r
}

// gate is a handler that blocks until released, counting entries.
type gate struct {
	release chan struct{}
	entered chan struct{}
}

func newGate() *gate { return &gate{release: make(chan struct{}), entered: make(chan struct{}, 1000)} }

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.entered <- struct{}{}
	<-g.release
	fmt.Fprintln(w, "ok")
}

// TestHTTPTierOrdering fills the only slot of an endpoint, then queues
// sheddable and critical requests from two callers. The queue stands, the
// endpoint becomes overloaded, every sheddable request is shed with 503 and
// a reason, and every critical request is served once the slot frees.
func TestHTTPTierOrdering(t *testing.T) {
	s, reg := newShedder(t, Config{
		Target: time.Millisecond, Interval: 10 * time.Millisecond,
		Limit: LimitConfig{Static: 1},
		Endpoints: []EndpointConfig{{Name: "GET /work", Callers: map[string]tier.Tier{
			"batch": tier.Sheddable, "trips": tier.Critical,
		}}},
	})
	g := newGate()
	mux := http.NewServeMux()
	mux.Handle("GET /work", g)
	srv := httptest.NewServer(s.Middleware(mux))
	defer srv.Close()
	c := srv.Client()

	var wg sync.WaitGroup
	hold := make(chan reply, 1)
	wg.Go(func() { hold <- get(t, c, srv.URL+"/work", map[string]string{tier.CallerHeader: "trips"}) })
	<-g.entered
	const n = 20
	low := make(chan reply, n)
	crit := make(chan reply, n)
	for range n {
		wg.Go(func() { low <- get(t, c, srv.URL+"/work", map[string]string{tier.CallerHeader: "batch"}) })
		wg.Go(func() { crit <- get(t, c, srv.URL+"/work", map[string]string{tier.CallerHeader: "trips"}) })
	}
	for range n {
		r := <-low
		if r.status != http.StatusServiceUnavailable || r.reason != "overload" && r.reason != "tier" {
			t.Errorf("sheddable request got %+v, want 503 overload or tier", r)
		}
	}
	close(g.release)
	for range n {
		if r := <-crit; r.status != http.StatusOK {
			t.Errorf("critical request got %+v, want 200", r)
		}
	}
	wg.Wait()
	if r := <-hold; r.status != http.StatusOK {
		t.Errorf("first request got %+v", r)
	}
	if got := counter(t, reg, "veer_shed_admitted_total", "GET /work", "critical", ""); got != n+1 {
		t.Errorf("admitted critical = %v, want %d", got, n+1)
	}
	shed := counter(t, reg, "veer_shed_shed_total", "GET /work", "sheddable", "overload") +
		counter(t, reg, "veer_shed_shed_total", "GET /work", "sheddable", "tier")
	if shed != n {
		t.Errorf("shed sheddable = %v, want %d", shed, n)
	}
	if got := counter(t, reg, "veer_shed_shed_total", "GET /work", "critical", "overload"); got != 0 {
		t.Errorf("shed critical = %v, want 0", got)
	}
}

// counter reads one series of a counter vector from reg.
func counter(t *testing.T, reg *prometheus.Registry, name, endpoint, tr, reason string) float64 {
	t.Helper()
	labels := map[string]string{"endpoint": endpoint, "tier": tr}
	if reason != "" { // "": the metric has no reason label
		labels["reason"] = reason
	}
	return metrictest.Sum(t, reg, name, labels)
}

// TestHTTPEndpointIsolation overloads one endpoint with sheddable traffic
// until it sheds, while a neighbouring endpoint serves every request.
func TestHTTPEndpointIsolation(t *testing.T) {
	s, _ := newShedder(t, Config{Target: time.Millisecond, Interval: 10 * time.Millisecond, Limit: LimitConfig{Static: 1}})
	g := newGate()
	mux := http.NewServeMux()
	mux.Handle("GET /spike", g)
	mux.HandleFunc("GET /quiet/{id}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, r.PathValue("id")) })
	srv := httptest.NewServer(s.Middleware(mux))
	defer srv.Close()
	c := srv.Client()

	var wg sync.WaitGroup
	wg.Go(func() { get(t, c, srv.URL+"/spike", nil) })
	<-g.entered
	const n = 30
	spike := make(chan reply, n)
	for range n {
		wg.Go(func() { spike <- get(t, c, srv.URL+"/spike", map[string]string{tier.Header: "sheddable"}) })
	}
	shed := 0
	for range n {
		r := <-spike
		if r.status == http.StatusServiceUnavailable {
			shed++
		}
		// The quiet endpoint serves while its neighbour is overloaded.
		if q := get(t, c, srv.URL+"/quiet/7", map[string]string{tier.Header: "sheddable"}); q.status != http.StatusOK {
			t.Fatalf("quiet endpoint got %+v while the spike endpoint was overloaded", q)
		}
	}
	close(g.release)
	wg.Wait()
	if shed != n {
		t.Errorf("%d of %d queued sheddable requests shed on the overloaded endpoint, want all", shed, n)
	}
	names := map[string]bool{}
	for _, st := range s.Stats() {
		names[st.Endpoint] = true
	}
	if !names["GET /spike"] || !names["GET /quiet/{id}"] || len(names) != 2 {
		t.Errorf("endpoints %v, want the two route patterns", names)
	}
}

func TestHTTPTierResolutionAndContext(t *testing.T) {
	s, _ := newShedder(t, Config{
		TrustedCallers: []string{"gateway"},
		Endpoints: []EndpointConfig{{Name: "GET /t", DefaultTier: tier.Sheddable, Callers: map[string]tier.Tier{
			"checkout": tier.Critical,
		}}},
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /t", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, tier.FromContext(r.Context()), " ", tier.CallerFromContext(r.Context()))
	})
	mux.HandleFunc("GET /u", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, tier.FromContext(r.Context()))
	})
	h := s.Middleware(mux)
	tests := []struct {
		path, caller, stated, want string
	}{
		{"/t", "gateway", "critical_plus", "critical_plus gateway"}, // trusted caller states
		{"/t", "evil", "critical_plus", "sheddable evil"},           // untrusted: endpoint default
		{"/t", "checkout", "sheddable", "critical checkout"},        // untrusted: table
		{"/t", "checkout", "", "critical checkout"},
		{"/t", "", "garbage", "unset "}, // malformed header counts as absent
		{"/u", "", "", "unset"},         // stated nothing: context untouched
	}
	for _, tt := range tests {
		req := httptest.NewRequest(http.MethodGet, tt.path, nil)
		if tt.caller != "" {
			req.Header.Set(tier.CallerHeader, tt.caller)
		}
		if tt.stated != "" {
			req.Header.Set(tier.Header, tt.stated)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Body.String(); got != tt.want {
			t.Errorf("%s caller=%q stated=%q: handler saw %q, want %q", tt.path, tt.caller, tt.stated, got, tt.want)
		}
	}
	if got := s.Resolve("GET /u", "", tier.Unset); got != tier.SheddablePlus {
		t.Errorf("default tier %v, want sheddable_plus", got)
	}
}

// TestHTTPEndpointsAreBounded sends random paths through a middleware that
// does not wrap a mux: they fill MaxEndpoints stages, then share "other".
func TestHTTPEndpointsAreBounded(t *testing.T) {
	s, reg := newShedder(t, Config{MaxEndpoints: 8})
	h := s.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := range 100 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, fmt.Sprintf("/r/%d", i), nil))
	}
	if n := len(s.Stats()); n != 9 {
		t.Fatalf("%d endpoints tracked, want 8 + other", n)
	}
	// A wrapped mux maps every unrouted path to one endpoint.
	s2, _ := newShedder(t, Config{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /a", func(http.ResponseWriter, *http.Request) {})
	h2 := s2.Middleware(mux)
	for i := range 50 {
		h2.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, fmt.Sprintf("/x/%d", i), nil))
	}
	if st := s2.Stats(); len(st) != 1 || st[0].Endpoint != UnmatchedEndpoint {
		t.Fatalf("stats %+v, want only %q", st, UnmatchedEndpoint)
	}
	for _, err := range obs.Lint(reg) {
		t.Error(err)
	}
}

func TestRejectionIsOverloadedOutcome(t *testing.T) {
	s, _ := newShedder(t, Config{})
	rec := httptest.NewRecorder()
	s.WriteRejection(rec, reject(ReasonQueueFull))
	resp := rec.Result()
	o := outcome.Classify(resp, nil)
	if o.Kind != outcome.Overloaded || o.RetryAfter != time.Second {
		t.Fatalf("rejection classifies as %v, want overloaded with Retry-After 1s", o)
	}
	if !bytes.Contains(rec.Body.Bytes(), []byte(`"reason":"queue_full"`)) {
		t.Fatalf("body %q does not name the reason", rec.Body.String())
	}
}

func TestAcquireContextCanceledWhileQueued(t *testing.T) {
	s, _ := newShedder(t, Config{Limit: LimitConfig{Static: 1}})
	tk, err := s.Acquire(context.Background(), "e", tier.Critical)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := s.Acquire(ctx, "e", tier.Critical)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, ErrShed) {
		t.Fatalf("canceled waiter: %v, want a rejection", err)
	}
	tk.Release()
	if st := s.Stats()[0]; st.Inflight != 0 || st.Queued != 0 {
		t.Fatalf("stats %+v after release, want nothing in flight or queued", s.Stats())
	}
}

// TestTimeoutHeader: Veer-Timeout-Ms gives the request a deadline that far
// from its arrival. In virtual time with one slot held: a request with a
// 50 ms budget queues, and when its deadline passes before a slot frees it
// is answered 503 with reason "deadline"; an admitted request's handler
// sees the deadline.
func TestTimeoutHeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newShedder(t, Config{Limit: LimitConfig{Static: 1}})
		release := make(chan struct{})
		var sawDeadline time.Duration
		h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if dl, ok := r.Context().Deadline(); ok {
				sawDeadline = time.Until(dl)
			}
			if r.URL.Path == "/hold" {
				<-release
			}
		}))
		do := func(path, timeout string) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "http://x"+path, nil)
			if timeout != "" {
				req.Header.Set(TimeoutHeader, timeout)
			}
			h.ServeHTTP(rec, req)
			return rec
		}
		go do("/hold", "")
		synctest.Wait()
		var queued *httptest.ResponseRecorder
		go func() { queued = do("/hold", "50") }()
		time.Sleep(60 * time.Millisecond)
		synctest.Wait()
		if queued == nil || queued.Code != http.StatusServiceUnavailable || !strings.Contains(queued.Body.String(), `"deadline"`) {
			t.Fatalf("queued request with a 50 ms budget after 60 ms: %+v", queued)
		}
		if got := queued.Header().Get(ReasonHeader); got != "deadline" {
			t.Fatalf("deadline drop: %s %q, want deadline (readable without the body)", ReasonHeader, got)
		}
		close(release)
		synctest.Wait()
		if rec := do("/fast", "250"); rec.Code != http.StatusOK || sawDeadline != 250*time.Millisecond {
			t.Fatalf("admitted request: %d, handler saw a deadline %v ahead, want 250ms", rec.Code, sawDeadline)
		}
		if rec := do("/fast", "abc"); rec.Code != http.StatusOK {
			t.Fatalf("malformed budget: %d, want it ignored", rec.Code)
		}
	})
}

// FuzzTimeoutHeader: any value either is ignored or decodes to a budget
// between 1 ms and MaxTimeout that formats back to the same digits.
func FuzzTimeoutHeader(f *testing.F) {
	for _, v := range []string{"1", "250", "0", "-5", "99999999", "86400000", "86400001", "1e3", " 5", ""} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := parseTimeout(v)
		if !ok {
			return
		}
		if d < time.Millisecond || d > MaxTimeout {
			t.Fatalf("%q decoded to %v", v, d)
		}
		if got := strconv.FormatInt(d.Milliseconds(), 10); strings.TrimLeft(v, "0") != got {
			t.Fatalf("%q decoded to %v", v, d)
		}
	})
}
