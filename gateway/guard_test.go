package gateway

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/shed"
)

func TestLimitGuard(t *testing.T) {
	var hits atomic.Int64
	a := upstream(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	_, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: a}]}]
clusters: [{name: a, backends: [{address: A}]}]
limits:
  keys: [route, "header:X-Tenant"]
  dimensions:
    - {name: route, default: {rate: 1000}}
    - {name: tenant, default: {rate: 0.001, burst: 2}}
`, "A", a))
	cl := &http.Client{}
	var codes []int
	for range 3 {
		resp, _ := get(t, cl, base+"/", "X-Tenant", "acme")
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	if resp, _ := get(t, cl, base+"/", "X-Tenant", "other"); resp.StatusCode != 200 {
		t.Errorf("other tenant limited: %d", resp.StatusCode)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Errorf("codes %v, want 200 200 429", codes)
	}
	if hits.Load() != 3 {
		t.Errorf("backend hits %d, want 3 (the limited request never sent)", hits.Load())
	}
}

func TestBreakerGuardAndTrustedHeaders(t *testing.T) {
	var hits atomic.Int64
	var seen atomic.Value
	a := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		seen.Store(r.Header.Get("Veer-Criticality") + "|" + r.Header.Get("Rpc-Caller"))
		if r.URL.Path == "/fail" {
			http.Error(w, "boom", 500)
		}
	})
	_, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: a}]}]
clusters: [{name: a, backends: [{address: A}], outlier: {consecutive_errors: 1000}}]
breaker: {enabled: true, min_requests: 5, levels: [{failure_ratio: 0.5, admit: 0}], open_for: 1m}
retry: {disabled: true}
shed: {enabled: true}
trusted_networks: [10.0.0.0/8]
`, "A", a))
	cl := &http.Client{}
	get(t, cl, base+"/", "Veer-Criticality", "critical_plus", "Rpc-Caller", "mallory")
	if s := seen.Load(); s != "|" {
		t.Errorf("untrusted client's tier headers forwarded: %q", s)
	}
	for range 5 {
		get(t, cl, base+"/fail")
	}
	before := hits.Load()
	resp, _ := get(t, cl, base+"/fail")
	if resp.StatusCode != 503 || hits.Load() != before {
		t.Errorf("breaker open: status %d, backend hits +%d; want 503 and nothing sent", resp.StatusCode, hits.Load()-before)
	}
}

func TestGRPCOverH2C(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	_, base := startGateway(t, fill(`
routes: [{name: grpc, clusters: [{name: g}]}]
clusters: [{name: g, protocol: h2c, backends: [{address: G}]}]
`, "G", ln.Addr().String()))
	conn, err := grpc.NewClient(strings.TrimPrefix(base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := healthpb.NewHealthClient(conn)
	var trailer metadata.MD
	resp, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "svc"}, grpc.Trailer(&trailer))
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check through the gateway: %v %v", resp, err)
	}
	// a gRPC error travels in the trailers (grpc-status), which must arrive
	_, err = c.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "unknown"})
	if err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Fatalf("unknown service: %v, want NotFound from the trailers", err)
	}
}

// TestGuardsUseTheLibrariesHTTPAdmission: the gateway admits through
// limit.AdmitHTTP and shed.AdmitHTTP, the paths the libraries' own
// middleware uses. Before, it called limit.Admit and shed.Acquire directly:
// a Veer-Timeout-Ms budget gave the request no deadline (it waited for the
// slow backend until the client's own 10 s guard), and header keys had no
// length bound (each 300-byte tenant got its own bucket; now every key over
// limit.MaxKeyLen shares one, so the second is limited).
func TestGuardsUseTheLibrariesHTTPAdmission(t *testing.T) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	a := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	_, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: a}], timeout: 1h, try_timeout: 1h}]
clusters: [{name: a, backends: [{address: A}]}]
shed: {enabled: true}
limits:
  keys: ["header:X-Tenant"]
  dimensions:
    - {name: tenant, default: {rate: 0.001, burst: 1}}
`, "A", a))
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Do(func() *http.Request {
		req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
		req.Header.Set("X-Tenant", "t1")
		req.Header.Set(shed.TimeoutHeader, "50")
		return req
	}())
	if err != nil {
		t.Fatalf("request with a 50 ms budget: %v (no deadline behind the gateway)", err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("request with a 50 ms budget: %d, want a failure once the budget is spent", resp.StatusCode)
	}
	long := func(c string) string { return strings.Repeat(c, limit.MaxKeyLen+44) }
	if resp, _ := get(t, cl, base+"/", "X-Tenant", long("x"), shed.TimeoutHeader, "1"); resp.StatusCode == 429 {
		t.Fatalf("first over-long tenant limited: %d", resp.StatusCode)
	}
	resp, _ = get(t, cl, base+"/", "X-Tenant", long("y"), shed.TimeoutHeader, "1")
	if resp.StatusCode != 429 {
		t.Fatalf("second over-long tenant: %d, want 429 (over-long keys share one bucket)", resp.StatusCode)
	}
}

// TestShedStartsWhereAProxyNeedsIt: a fresh gateway with shedding on lets
// 20 concurrent slow requests through to the backend at once. Before, the
// adaptive limit started at shed's default 4 (built for CPU-bound
// handlers) and the others were queued and shed with 503.
func TestShedStartsWhereAProxyNeedsIt(t *testing.T) {
	const n = 20
	arrived, release := make(chan struct{}, n), make(chan struct{})
	a := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	})
	_, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: a}]}]
clusters: [{name: a, backends: [{address: A}]}]
shed: {enabled: true}
`, "A", a))
	codes := make(chan int, n)
	cl := &http.Client{Timeout: 10 * time.Second}
	for range n {
		go func() {
			resp, err := cl.Get(base + "/")
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	for got := 0; got < n; {
		select {
		case <-arrived:
			got++
		case c := <-codes:
			close(release)
			t.Fatalf("a request was answered %d after %d of %d reached the backend, want all %d let through", c, got, n, n)
		}
	}
	close(release)
	for range n {
		if c := <-codes; c != 200 {
			t.Errorf("status %d, want 200", c)
		}
	}
}
