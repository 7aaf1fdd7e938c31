package gateway

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

func TestCrossClusterRetry(t *testing.T) {
	b, _ := echoUpstream(t, "b")
	// a backend that reads the request and resets the connection: the
	// request reached the upstream, so only idempotent ones may be retried
	resetter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resetter.Close() })
	go func() {
		for {
			c, err := resetter.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			_, _ = c.Read(buf)
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
		}
	}()
	g, base := startGateway(t, fill(`
routes:
  - {name: refused, path_prefix: /refused, clusters: [{name: dead}, {name: b}]}
  - {name: reset, path_prefix: /reset, clusters: [{name: rst}, {name: b}]}
clusters:
  - {name: dead, backends: [{address: DEAD}], outlier: {consecutive_errors: 1000}}
  - {name: rst, backends: [{address: RST}], outlier: {consecutive_errors: 1000}}
  - {name: b, backends: [{address: B}]}
retry: {policy: {initial: 1ms}, budget: {min_retries: 100}}
`, "DEAD", deadAddr(t), "RST", resetter.Addr().String(), "B", b))
	cl := &http.Client{}
	post := func(path string, hdr ...string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader("payload"))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct {
		name, method, path string
		hdr                []string
		status             int
		want               string
	}{
		{"connect refused: never sent, POST retried on the other cluster", "POST", "/refused", nil, 200, "b POST payload"},
		{"GET after a reset: idempotent, retried", "GET", "/reset", nil, 200, "b GET"},
		{"POST after a reset: may have run, not retried", "POST", "/reset", nil, 502, ""},
		{"POST with Idempotency-Key after a reset: retried with its body", "POST", "/reset", []string{"Idempotency-Key", "k1"}, 200, "b POST payload"},
	} {
		var status int
		var body string
		if tc.method == "GET" {
			resp, b := get(t, cl, base+tc.path)
			status, body = resp.StatusCode, b
		} else {
			status, body = post(tc.path, tc.hdr...)
		}
		if status != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, status, body, tc.status, tc.want)
		}
	}
	_ = g
}

func TestRetryAttemptsBounded(t *testing.T) {
	var hits atomic.Int64
	fail := func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}
	a, b, c, d := upstream(t, fail), upstream(t, fail), upstream(t, fail), upstream(t, fail)
	_, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: a}, {name: b}, {name: c}, {name: d}]}]
clusters:
  - {name: a, backends: [{address: A}], outlier: {consecutive_errors: 1000}}
  - {name: b, backends: [{address: B}], outlier: {consecutive_errors: 1000}}
  - {name: c, backends: [{address: C}], outlier: {consecutive_errors: 1000}}
  - {name: d, backends: [{address: D}], outlier: {consecutive_errors: 1000}}
retry: {policy: {initial: 1ms}, budget: {min_retries: 100}}
`, "A", a, "B", b, "C", c, "D", d))
	resp, _ := get(t, &http.Client{}, base+"/")
	if resp.StatusCode != 503 {
		t.Errorf("status %d, want the last upstream 503", resp.StatusCode)
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("%d attempts, want 3 (at most 3 in all)", n)
	}
}

func TestRetryBudget(t *testing.T) {
	var hits atomic.Int64
	fail := func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}
	a, b := upstream(t, fail), upstream(t, fail)
	_, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: a}, {name: b}]}]
clusters:
  - {name: a, backends: [{address: A}], outlier: {consecutive_errors: 1000}}
  - {name: b, backends: [{address: B}], outlier: {consecutive_errors: 1000}}
retry: {policy: {initial: 1ms, max_attempts: 2}, budget: {ratio: 0.1, min_retries: 3, interval: 1m}}
`, "A", a, "B", b))
	cl := &http.Client{}
	for range 20 {
		get(t, cl, base+"/")
	}
	// 20 requests; retries allowed: max(3, 10% of 20) = 3
	if n := hits.Load(); n != 23 {
		t.Errorf("%d attempts for 20 requests, want 23 (budget: 3 retries)", n)
	}
}

func TestDrainAndFailover(t *testing.T) {
	var aHits, bHits atomic.Int64
	a := upstream(t, func(w http.ResponseWriter, r *http.Request) { aHits.Add(1) })
	b := upstream(t, func(w http.ResponseWriter, r *http.Request) { bHits.Add(1) })
	g, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: a}, {name: b}]}]
clusters:
  - {name: a, backends: [{address: A}], return_ramp: 1ns}
  - {name: b, backends: [{address: B}]}
`, "A", a, "B", b))
	cl := &http.Client{}
	run := func(n int) (int64, int64) {
		a0, b0 := aHits.Load(), bHits.Load()
		for range n {
			if resp, _ := get(t, cl, base+"/"); resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		return aHits.Load() - a0, bHits.Load() - b0
	}
	if x, y := run(10); x != 10 || y != 0 {
		t.Fatalf("ordered: a=%d b=%d, want all on a", x, y)
	}
	if err := g.Drain("a", "", true); err != nil {
		t.Fatal(err)
	}
	if x, y := run(10); x != 0 || y != 10 {
		t.Fatalf("a drained: a=%d b=%d, want all on b", x, y)
	}
	if err := g.Drain("a", "", false); err != nil {
		t.Fatal(err)
	}
	if x, _ := run(10); x != 10 {
		t.Fatalf("a undrained: a=%d, want 10", x)
	}
	if err := g.Drain("b", "nowhere:1", true); err != ErrUnknownTarget {
		t.Fatalf("unknown backend: %v", err)
	}
	// both drained: 503, nothing sent
	_ = g.Drain("a", "", true)
	_ = g.Drain("b", "", true)
	if resp, _ := get(t, cl, base+"/"); resp.StatusCode != 503 {
		t.Fatalf("all drained: %d, want 503", resp.StatusCode)
	}
}

// A fresh gateway whose route's first cluster refuses every connection
// (and is never ejected, so that every request needs its retry) serves its
// first 80 requests from the second cluster: the default budget keeps a
// floor of DefaultRetryBudgetMinPerSecond × the window (100 per 10 s) where
// retry's own floor, 3, failed all but the first handful (the ratio alone
// allows half of them). A min_retries in the file still rules.
func TestRetryBudgetFloorOnAFreshGateway(t *testing.T) {
	b, _ := echoUpstream(t, "b")
	dead := deadAddr(t)
	for _, tc := range []struct {
		budget string
		wantOK int
	}{
		{"{}", 80},
		// retries allowed: max(3, 0.5 × requests) ~ half of them
		{"{min_retries: 3}", 40},
	} {
		_, base := startGateway(t, fill(`
routes: [{name: r, clusters: [{name: dead}, {name: b}]}]
clusters:
  - {name: dead, backends: [{address: DEAD}], outlier: {consecutive_errors: 1000, min_requests: 1000}}
  - {name: b, backends: [{address: B}]}
retry: {budget: BGT}
`, "BGT", tc.budget, "DEAD", dead, "B", b))
		cl := &http.Client{}
		ok := 0
		for range 80 {
			if resp, _ := get(t, cl, base+"/"); resp.StatusCode == 200 {
				ok++
			}
		}
		if ok < tc.wantOK-1 || ok > tc.wantOK+1 {
			t.Errorf("budget %s: %d of 80 requests served, want %d", tc.budget, ok, tc.wantOK)
		}
	}
}
