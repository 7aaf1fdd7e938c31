package failover

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/internal/metrictest"
	"github.com/veerhq/veer/outcome"
)

// deadOriginEdge is an edge proxy (net/http/httputil's ReverseProxy) in
// front of an origin that is gone: every request gets a real 502 from it.
func deadOriginEdge(t *testing.T) http.Handler {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	origin := &url.URL{Scheme: "http", Host: ln.Addr().String()}
	ln.Close() // the origin is dead: connections are refused
	p := httputil.NewSingleHostReverseProxy(origin)
	p.ErrorLog = nil
	p.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) { w.WriteHeader(http.StatusBadGateway) }
	return p
}

// TestFailureStatusesDeadOrigin: an edge answers 502 for a dead origin while
// the backup is healthy. With the default configuration nothing fails over
// (a 502 proves the edge reachable); with FailureStatuses [502, 504] the
// veer policy moves traffic to the backup (its primary canary, answered 502
// too, confirms the failure).
func TestFailureStatusesDeadOrigin(t *testing.T) {
	for _, statuses := range [][]int{nil, {502, 504}} {
		l := newLab(t, "primary.test", "dc1.test")
		l.upWith("primary.test", deadOriginEdge(t))
		r := newRig(t, l, filepath.Join(t.TempDir(), "f.json"), func(c *Config) {
			c.Policy = "" // the default, veer
			c.Backups = []string{"dc1.test"}
			c.FailureStatuses = statuses
		})
		for range 3 {
			resp, err := r.c.Get("http://primary.test/v1")
			if err != nil || resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("GET through the edge: %v, %v; want a 502", resp, err)
			}
			resp.Body.Close()
		}
		if statuses == nil {
			r.ev.none(t)
			r.wantState(t, Primary, "primary.test")
			continue
		}
		r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
		r.can.want(t, "dc1.test ok", "primary.test fail")
		r.ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc1.test")
		mustGet(t, r.c, "http://primary.test/v1", "dc1.test")
	}
}

// cutBody answers with headers announcing 100 bytes and sends 10. On
// /hold it then waits for the client to go away; otherwise it resets the
// connection (SO_LINGER 0): the client's body read fails mid-body.
func cutBody(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Length", "100")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, strings.Repeat("x", 10))
	w.(http.Flusher).Flush()
	if r.URL.Path == "/hold" {
		<-r.Context().Done()
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// TestBodyReadErrors: a connection reset while the body is read is a
// network failure of that request; a body the caller closes early, or a
// read the caller's context cancels, is not reported.
func TestBodyReadErrors(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test", "dc2.test")
	l.upWith("primary.test", http.HandlerFunc(cutBody))
	r := newRig(t, l, filepath.Join(t.TempDir(), "f.json"), nil)

	// The caller closes early (twice), and cancels mid-body (once).
	for range 2 {
		resp, err := r.c.Get("http://primary.test/hold")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Read(make([]byte, 5))
		resp.Body.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://primary.test/hold", nil)
	resp, err := r.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v, want context.Canceled", err)
	}
	resp.Body.Close()
	r.ev.none(t)

	// Three bodies cut by a reset: X = 3 failures.
	for i := range 3 {
		resp, err := r.c.Get("http://primary.test/big")
		if err != nil {
			t.Fatalf("request %d: headers failed: %v", i, err)
		}
		if _, err := io.ReadAll(resp.Body); err == nil {
			t.Fatalf("request %d: the body read succeeded (state %v on %s)", i, r.tr.State(), r.tr.Domain())
		}
		resp.Body.Close()
	}
	r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
	r.can.want(t, "dc1.test ok")
	r.ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc1.test")
}

// TestHistoryTransport: the default policy remembers that the primary failed
// on a network, persists that with the backup domain, and on coming back to
// that network starts FAILOVER at once, without a failed regular request.
func TestHistoryTransport(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test")
	path := filepath.Join(t.TempDir(), "f.json")
	veer := func(c *Config) {
		c.Policy = ""
		c.Backups = []string{"dc1.test"}
	}
	r := newRig(t, l, path, veer)
	r.tr.SetNetwork("cell/C4/lte")
	l.down("primary.test") // C4's resolver fails the primary, say
	// A refused connection is an answer: one is enough to start FAILOVER.
	mustFail(t, r.c, "http://primary.test/a")
	r.ev.want(t, Primary, Failover, ReasonAnsweredFailure, "primary.test")
	r.can.want(t, "dc1.test ok", "primary.test fail")
	r.ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc1.test")
	r.store.want(t, "save dc1.test")

	// On Wi-Fi the primary works: the early probe brings traffic back.
	l.up("primary.test")
	r.tr.SetNetwork("wifi/home")
	r.ev.want(t, Backup, Recovery, ReasonNetworkChanged, "dc1.test")
	r.can.want(t, "primary.test ok")
	r.ev.want(t, Recovery, Primary, ReasonRecoverySuccess, "primary.test")
	r.store.want(t, "clear")
	mustGet(t, r.c, "http://primary.test/b", "primary.test")

	// Back on C4: FAILOVER at once, before any request.
	l.down("primary.test")
	r.tr.SetNetwork("cell/C4/lte")
	r.ev.want(t, Primary, Failover, ReasonHistory, "primary.test")
	r.can.want(t, "dc1.test ok", "primary.test fail")
	r.ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc1.test")
	r.store.want(t, "save dc1.test")
	r.tr.Close()

	// Persisted with the backup domain.
	h, err := FileStore(path).LoadHistory()
	if err != nil || len(h) != 1 || h[0].Network != "cell/C4/lte" || !h[0].At.Equal(t0) {
		t.Fatalf("persisted history %v, %v; want cell/C4/lte at %v", h, err, t0)
	}
	// A new launch on C4 with the domain cleared starts FAILOVER at once.
	if err := FileStore(path).Clear(); err != nil {
		t.Fatal(err)
	}
	r2 := newRig(t, l, path, veer)
	r2.tr.SetNetwork("cell/C4/lte")
	r2.ev.want(t, Primary, Failover, ReasonHistory, "primary.test")
}

// TestGatewayAnswersDecideFailover: with the default configuration (no
// FailureStatuses), a veer gateway's "nothing behind me can serve" (a 5xx
// whose Veer-Outcome names a network kind or upstream_unavailable, written
// by outcome.WriteHTTP) moves traffic to the backup like a dead connection;
// a shed 503, a 429 and an application's own 5xx never do (issue 27,
// defect 3).
func TestGatewayAnswersDecideFailover(t *testing.T) {
	steps := []struct {
		name  string
		write func(w http.ResponseWriter)
		moves bool
	}{
		{"every backend refused (502)", func(w http.ResponseWriter) {
			outcome.WriteHTTP(w, outcome.Of(outcome.ConnectRefused), "upstream connect_refused")
		}, true},
		{"every backend frozen (504)", func(w http.ResponseWriter) {
			outcome.WriteHTTP(w, outcome.Of(outcome.ResponseTimeout), "upstream response_timeout")
		}, true},
		{"no healthy cluster (503)", func(w http.ResponseWriter) {
			outcome.WriteHTTP(w, outcome.Of(outcome.UpstreamUnavailable), "no upstream")
		}, true},
		{"shed (503)", func(w http.ResponseWriter) { outcome.WriteHTTP(w, outcome.Of(outcome.Overloaded), "overload") }, false},
		{"limited (429)", func(w http.ResponseWriter) { outcome.WriteHTTP(w, outcome.Of(outcome.Limited), "limit tenant") }, false},
		{"the application's 500", func(w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) }, false},
		{"the application's 503", func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }, false},
	}
	for _, st := range steps {
		l := newLab(t, "primary.test", "dc1.test")
		l.upWith("primary.test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { st.write(w) }))
		r := newRig(t, l, filepath.Join(t.TempDir(), "f.json"), func(c *Config) {
			c.Policy = "" // the default, veer
			c.Backups = []string{"dc1.test"}
		})
		for range 3 {
			resp, err := r.c.Get("http://primary.test/v1")
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			resp.Body.Close()
		}
		if !st.moves {
			r.ev.none(t)
			r.wantState(t, Primary, "primary.test")
			continue
		}
		r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
		r.can.want(t, "dc1.test ok", "primary.test fail")
		r.ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc1.test")
		mustGet(t, r.c, "http://primary.test/v1", "dc1.test")
	}
}

// TestCanaryPathMisconfigured: a backup that answers 404 on the canary path
// (backends without the path, behind a proxy that relays it) makes every
// canary fail, so failover silently never happens (issue 27, defect 2):
// the Transport counts each such canary and logs the cause once.
func TestCanaryPathMisconfigured(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test")
	l.upWith("dc1.test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(CanaryHeader) != "" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "dc1.test")
	}))
	r := newRig(t, l, filepath.Join(t.TempDir(), "f.json"), func(c *Config) { c.Backups = []string{"dc1.test"} })
	l.down("primary.test")
	for range 3 {
		mustFail(t, r.c, "http://primary.test/a")
	}
	r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
	r.can.want(t, "dc1.test fail")
	r.clk.Advance(time.Minute) // more rounds of canaries, each answered 404
	r.can.want(t, "dc1.test fail")
	if n := metrictest.Sum(t, r.reg, "veer_failover_canary_misconfigured_total", map[string]string{"domain": "backup_1"}); n < 2 {
		t.Fatalf("misconfigured canaries counted %v, want >= 2", n)
	}
	var warned int
	for _, w := range r.logs.warnings() {
		if strings.Contains(w, "canary path is not a health endpoint") {
			warned++
		}
	}
	if warned != 1 {
		t.Fatalf("%d warnings about the canary path, want exactly 1: %q", warned, r.logs.warnings())
	}
}
