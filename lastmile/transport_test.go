package lastmile

import (
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/routing/schedule"
)

func TestRaceHTTP3WinsAndRouteIsReused(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, "n1", lmtest.NodeOptions{})
	tp := w.transport(t, Config{})
	url := "https://api.test:" + strconv.Itoa(port(n.Addr())) + "/"
	body, tr := mustGet(t, tp, url)
	if body != "n1 HTTP/3.0" || tr.Served != StepDirect || tr.Protocol != "h3" || tr.Resolver != StepSystem {
		t.Fatalf("body %q trace %s", body, tr)
	}
	// Later requests: same route, no DNS at all.
	w.public.SetMode(lmtest.Silent)
	w.private.SetMode(lmtest.Silent)
	q := w.public.Queries()
	for range 3 {
		body, tr = mustGet(t, tp, url)
		if body != "n1 HTTP/3.0" || tr.Served != StepRoute || len(tr.Failures) != 0 {
			t.Fatalf("body %q trace %s", body, tr)
		}
	}
	if w.public.Queries() != q {
		t.Fatal("route reuse touched DNS")
	}
	// A network change re-runs the chain (DNS is dead now: served stale? no,
	// the cache is fresh, so from the cache).
	tp.NetworkChanged()
	_, tr = mustGet(t, tp, url)
	if tr.Served != StepDirect || tr.Resolver != StepCache {
		t.Fatalf("after NetworkChanged: %s", tr)
	}
	for _, err := range obs.Lint(w.reg) {
		t.Error(err)
	}
	if got := testutilCount(t, w.reg, "veer_lastmile_served_total", map[string]string{"step": "route"}); got != 3 {
		t.Fatalf("served by route = %v, want 3", got)
	}
}

func TestQUICBlockedTCPWins(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, "n1", lmtest.NodeOptions{})
	n.BlockQUIC(true)
	p := strconv.Itoa(port(n.Addr()))

	t.Run("TCP after the delay wins while QUIC hangs", func(t *testing.T) {
		tp := w.transport(t, Config{Race: RaceConfig{TCPDelay: 20 * time.Millisecond}})
		body, tr := mustGet(t, tp, "https://api.test:"+p+"/")
		if body != "n1 HTTP/2.0" || tr.Protocol != "h2" {
			t.Fatalf("body %q trace %s", body, tr)
		}
	})
	t.Run("failed QUIC is remembered as broken for the node", func(t *testing.T) {
		// TCP would start only after a minute: it starts at once when QUIC
		// fails (handshake timeout), and the next race skips QUIC.
		tp := w.transport(t, Config{Race: RaceConfig{TCPDelay: time.Minute, ConnectTimeout: time.Second}})
		_, tr := mustGet(t, tp, "https://api.test:"+p+"/")
		if tr.Protocol != "h2" || !slices.Equal(tr.FailedSteps(), steps(ProtocolH3)) || tr.Failures[0].Kind != outcome.QUICHandshake {
			t.Fatalf("first: %s", tr)
		}
		_, tr = mustGet(t, tp, "https://api2.test:"+p+"/") // same node, new route
		if tr.Protocol != "h2" || len(tr.Failures) != 0 {
			t.Fatalf("second (QUIC should be skipped): %s", tr)
		}
		// On another network QUIC is tried again.
		tp.NetworkChanged()
		_, tr = mustGet(t, tp, "https://api2.test:"+p+"/")
		if !slices.Equal(tr.FailedSteps(), steps(ProtocolH3)) {
			t.Fatalf("after network change: %s", tr)
		}
	})
	t.Run("HTTP/1.1 fallback when the node has no h2", func(t *testing.T) {
		n1 := w.node(t, "old", lmtest.NodeOptions{NoH2: true})
		n1.BlockQUIC(true)
		tp := w.transport(t, Config{Race: RaceConfig{TCPDelay: 10 * time.Millisecond}})
		body, tr := mustGet(t, tp, "https://api.test:"+strconv.Itoa(port(n1.Addr()))+"/")
		if body != "old HTTP/1.1" || tr.Protocol != "http/1.1" {
			t.Fatalf("body %q trace %s", body, tr)
		}
	})
}

func TestSchedulerNodesInOrder(t *testing.T) {
	w := newWorld(t)
	good := w.node(t, "good", lmtest.NodeOptions{})
	sched := lmtest.NewScheduler(300,
		lmtest.AccessNode{Addr: deadAddr(t)},
		lmtest.AccessNode{Addr: good.Addr(), Protocols: []string{"h2"}},
	)
	sn := w.node(t, "sched", lmtest.NodeOptions{Handler: sched})
	tp := w.transport(t, Config{
		Scheduler: SchedulerConfig{URL: "https://sched.test:" + strconv.Itoa(port(sn.Addr())) + "/v1/schedule"},
		Race:      RaceConfig{TCPDelay: 10 * time.Millisecond},
	})
	body, tr := mustGet(t, tp, "https://api.test/")
	if body != "good HTTP/2.0" || tr.Served != StepScheduler || tr.Addr != good.Addr() || tr.ServerName != "api.test" {
		t.Fatalf("body %q trace %s", body, tr)
	}
	if fs := tr.FailedSteps(); !slices.Contains(fs, string(ProtocolTCP)) {
		t.Fatalf("dead node's failure not traced: %s", tr)
	}
	// The dead node's UDP port is closed: QUIC failed at once on the ICMP
	// port-unreachable (or, had that been lost, was abandoned after TCP was
	// refused), never waiting for the QUIC handshake timeout (2 s here).
	abandoned := slices.ContainsFunc(tr.Failures, func(f Failure) bool {
		return errors.Is(f.Err, ErrQUICAbandoned) || errors.Is(f.Err, ErrUDPRefused)
	})
	if !abandoned || tr.Chain >= 2*time.Second {
		t.Fatalf("QUIC to the dead node not abandoned (chain %v): %s", tr.Chain, tr)
	}
	if last := sched.Last(); last.Domain != "api.test" || last.Version != schedule.Version {
		t.Fatalf("schedule request %+v", last)
	}
	// The answer is cached for its TTL: a second route for the same domain
	// does not ask again.
	_, tr = mustGet(t, tp, "https://api.test:443/")
	if tr.Served != StepScheduler || sched.Asked() != 1 {
		t.Fatalf("asked %d times; %s", sched.Asked(), tr)
	}
}

func TestSchedulerRetriedOverHTTP3WhenTCPFails(t *testing.T) {
	w := newWorld(t)
	good := w.node(t, "good", lmtest.NodeOptions{})
	sched := lmtest.NewScheduler(300, lmtest.AccessNode{Addr: good.Addr()})
	sn := w.node(t, "sched", lmtest.NodeOptions{Handler: sched})
	sn.BlockTCP(true)
	tp := w.transport(t, Config{
		Steps:     []RouteStep{StepScheduler},
		Scheduler: SchedulerConfig{URL: "https://sched.test:" + strconv.Itoa(port(sn.Addr())) + "/v1/schedule"},
	})
	_, tr := mustGet(t, tp, "https://api.test/")
	if tr.Served != StepScheduler || sched.Asked() != 1 {
		t.Fatalf("asked %d; %s", sched.Asked(), tr)
	}
	if fs := tr.FailedSteps(); len(fs) == 0 || fs[0] != string(ProtocolTCP) {
		t.Fatalf("first TCP attempt's failure not traced: %s", tr)
	}
}

func TestSchedulerDownCDNThenFallbackIP(t *testing.T) {
	w := newWorld(t)
	lb := w.node(t, "lb", lmtest.NodeOptions{})
	sched := lmtest.NewScheduler(300, lmtest.AccessNode{Addr: lb.Addr()})
	sched.SetDown(true)
	sn := w.node(t, "sched", lmtest.NodeOptions{Handler: sched})
	dead := port(deadAddr(t))
	w.public.SetRecord("api.test") // the domain itself no longer resolves
	w.private.SetRecord("api.test")
	w.dohBack.SetRecord("api.test")
	cfg := Config{
		Stagger:     -1, // each step's failure is asserted: one after another
		Scheduler:   SchedulerConfig{URL: "https://sched.test:" + strconv.Itoa(port(sn.Addr())) + "/v1/schedule"},
		CDN:         []CDNDomain{{Domain: "cdn1.test", Port: dead}, {Domain: "cdn-gone.test", Port: dead}},
		FallbackIPs: []FallbackIP{{Addr: lb.Addr(), ServerName: "lb.test"}},
		Race:        RaceConfig{TCPDelay: 10 * time.Millisecond},
	}
	tp := w.transport(t, cfg)
	body, tr := mustGet(t, tp, "https://api.test/")
	if !strings.HasPrefix(body, "lb ") || tr.Served != StepFallbackIP || tr.ServerName != "lb.test" {
		t.Fatalf("body %q trace %s", body, tr)
	}
	fs := tr.FailedSteps()
	for _, s := range steps(StepScheduler, StepDirect, StepCDN) {
		if !slices.Contains(fs, s) {
			t.Errorf("step %s failure not traced: %s", s, tr)
		}
	}
	if got := testutilCount(t, w.reg, "veer_lastmile_served_total", map[string]string{"step": "fallback_ip"}); got != 1 {
		t.Errorf("served by fallback_ip = %v", got)
	}
	if got := testutilCount(t, w.reg, "veer_lastmile_step_failures_total", map[string]string{"step": "scheduler", "kind": "overloaded"}); got == 0 {
		t.Errorf("scheduler 503 not counted as overloaded: %s", tr)
	}
}

func TestCDNServesWhenDirectFails(t *testing.T) {
	w := newWorld(t)
	cdn := w.node(t, "cdn", lmtest.NodeOptions{})
	w.public.SetRecord("api.test")
	w.private.SetRecord("api.test")
	w.dohBack.SetRecord("api.test")
	tp := w.transport(t, Config{CDN: []CDNDomain{{Domain: "cdn-gone.test"}, {Domain: "cdn2.test", Port: port(cdn.Addr())}}})
	body, tr := mustGet(t, tp, "https://api.test/")
	if body != "cdn HTTP/3.0" || tr.Served != StepCDN || tr.ServerName != "cdn2.test" {
		t.Fatalf("body %q trace %s", body, tr)
	}
}

func TestDeadRouteIsReroutedWithinTheRequest(t *testing.T) {
	w := newWorld(t)
	a := w.node(t, "a", lmtest.NodeOptions{})
	b := w.node(t, "b", lmtest.NodeOptions{})
	tp := w.transport(t, Config{FallbackIPs: []FallbackIP{{Addr: b.Addr()}}, Race: RaceConfig{DisableH3: true}})
	url := "https://api.test:" + strconv.Itoa(port(a.Addr())) + "/"
	if body, _ := mustGet(t, tp, url); body != "a HTTP/2.0" {
		t.Fatalf("body %q", body)
	}
	a.Close() // node a dies: the next dial is refused, the request was never sent
	tp.CloseIdleConnections()
	body, tr := mustGet(t, tp, url)
	if body != "b HTTP/2.0" || tr.Served != StepFallbackIP || tr.Failures[0].Route != StepRoute ||
		tr.Failures[0].Kind != outcome.ConnectRefused {
		t.Fatalf("body %q trace %s", body, tr)
	}
}

func TestRepeatedFailuresRerunTheChain(t *testing.T) {
	w := newWorld(t)
	a := w.node(t, "a", lmtest.NodeOptions{})
	b := w.node(t, "b", lmtest.NodeOptions{})
	// The domain resolves to node a's port; the fallback IP is node b.
	tp := w.transport(t, Config{
		FallbackIPs:      []FallbackIP{{Addr: b.Addr()}},
		MaxRouteFailures: 2,
		Race:             RaceConfig{DisableH3: true},
	})
	url := "https://api.test:" + strconv.Itoa(port(a.Addr())) + "/"
	if body, _ := mustGet(t, tp, url); body != "a HTTP/2.0" {
		t.Fatalf("body %q", body)
	}
	a.BlockTCP(true) // node a accepts and resets: not provably unsent
	tp.CloseIdleConnections()
	for i := range 2 {
		if _, tr, err := get(t, tp, url); err == nil || tr.Served != StepRoute || tr.FailedSteps()[0] != string(StepRoute) {
			t.Fatalf("request %d on the dead route: err %v trace %s", i, err, tr)
		}
	}
	body, tr := mustGet(t, tp, url)
	if body != "b HTTP/2.0" || tr.Served != StepFallbackIP {
		t.Fatalf("after %d failures: body %q trace %s", 2, body, tr)
	}
}

// The scenarios of issue 7 end to end through the Transport.
func TestScenarios(t *testing.T) {
	t.Run("public DNS dead -> private DNS", func(t *testing.T) {
		w := newWorld(t)
		n := w.node(t, "n", lmtest.NodeOptions{})
		w.public.SetMode(lmtest.Silent)
		tp := w.transport(t, Config{})
		_, tr := mustGet(t, tp, "https://api.test:"+strconv.Itoa(port(n.Addr()))+"/")
		if tr.Served != StepDirect || tr.Resolver != StepPrivateUDP || tr.Failures[0].Kind != outcome.DNSTimeout {
			t.Fatalf("%s", tr)
		}
	})
	t.Run("private DNS UDP dropped -> TCP wins the race", func(t *testing.T) {
		w := newWorld(t)
		n := w.node(t, "n", lmtest.NodeOptions{})
		w.public.SetMode(lmtest.ServFail)
		w.private.SetMode(lmtest.DropUDP)
		tp := w.transport(t, Config{})
		_, tr := mustGet(t, tp, "https://api.test:"+strconv.Itoa(port(n.Addr()))+"/")
		if tr.Resolver != StepPrivateRace || !slices.Equal(tr.FailedSteps(), steps(StepSystem, StepPrivateUDP)) {
			t.Fatalf("%s", tr)
		}
	})
	t.Run("DNS hijacked -> private DNS", func(t *testing.T) {
		w := newWorld(t)
		n := w.node(t, "n", lmtest.NodeOptions{})
		w.public.SetMode(lmtest.Hijack)
		tp := w.transport(t, Config{DNS: DNSConfig{Expected: map[string][]string{"api.test": {"127.0.0.1/32"}}}})
		_, tr := mustGet(t, tp, "https://api.test:"+strconv.Itoa(port(n.Addr()))+"/")
		if tr.Resolver != StepPrivateUDP || !errors.Is(tr.Failures[0].Err, ErrHijacked) {
			t.Fatalf("%s", tr)
		}
	})
	t.Run("all DNS dead on a cold start with a persisted cache -> stale answer", func(t *testing.T) {
		w := newWorld(t)
		n := w.node(t, "n", lmtest.NodeOptions{})
		cache := filepath.Join(t.TempDir(), "dns.json")
		url := "https://api.test:" + strconv.Itoa(port(n.Addr())) + "/"
		first := w.transport(t, Config{DNS: DNSConfig{CacheFile: cache}})
		mustGet(t, first, url)
		first.Close()

		w.public.SetMode(lmtest.Silent)
		w.private.SetMode(lmtest.Silent)
		w.dohBack.SetMode(lmtest.Silent)
		later := clock.NewManual(time.Now().Add(49 * time.Minute)) // the seed's outage
		tp := w.transport(t, Config{DNS: DNSConfig{CacheFile: cache}}, func(o *Options) { o.Clock = later })
		body, tr := mustGet(t, tp, url)
		if !strings.HasPrefix(body, "n ") || tr.Resolver != StepStale {
			t.Fatalf("body %q trace %s", body, tr)
		}
		if !strings.Contains(tr.String(), "doh") {
			t.Fatalf("trace misses the DoH failure: %s", tr)
		}
	})
}

func TestEverythingDownReportsNoRoute(t *testing.T) {
	w := newWorld(t)
	w.public.SetMode(lmtest.ServFail)
	w.private.SetMode(lmtest.ServFail)
	w.dohBack.SetMode(lmtest.ServFail)
	tp := w.transport(t, Config{FallbackIPs: []FallbackIP{{Addr: deadAddr(t)}}, Race: RaceConfig{TCPDelay: time.Millisecond}})
	_, tr, err := get(t, tp, "https://api.test/")
	if !errors.Is(err, ErrNoRoute) || !outcome.ClassifyError(err).Network() {
		t.Fatalf("err = %v (kind %v)", err, outcome.ClassifyError(err))
	}
	if fs := tr.FailedSteps(); !slices.Contains(fs, string(StepDirect)) || !slices.Contains(fs, string(StepFallbackIP)) || tr.Host != "api.test" {
		t.Fatalf("%s", tr)
	}
}

func TestNodeBrokenOnAllProtocolsIsSkippedThenRetriedLast(t *testing.T) {
	w := newWorld(t)
	lb := w.node(t, "lb", lmtest.NodeOptions{})
	dead := deadAddr(t)
	sched := lmtest.NewScheduler(300, lmtest.AccessNode{Addr: dead})
	sn := w.node(t, "sched", lmtest.NodeOptions{Handler: sched})
	tp := w.transport(t, Config{
		// Direct first, steps one after another: the scheduler's answer
		// comes after the direct step marked the node broken.
		Steps:       []RouteStep{StepDirect, StepScheduler, StepFallbackIP},
		Stagger:     -1,
		Scheduler:   SchedulerConfig{URL: "https://sched.test:" + strconv.Itoa(port(sn.Addr())) + "/v1/schedule"},
		FallbackIPs: []FallbackIP{{Addr: lb.Addr()}},
		Race:        RaceConfig{TCPDelay: time.Millisecond, ConnectTimeout: time.Second}, // 200 ms: a TLS handshake under -race on a busy machine can take longer
	})
	// The domain resolves to the same dead node the scheduler returned.
	_, tr := mustGet(t, tp, "https://api.test:"+strconv.Itoa(port(dead))+"/")
	if tr.Served != StepFallbackIP {
		t.Fatalf("%s", tr)
	}
	skipped := 0
	for _, sk := range tr.Skipped {
		if errors.Is(sk.Reason, ErrSkippedBroken) && sk.Target == dead {
			skipped++
			if sk.Route != StepScheduler {
				t.Errorf("skipped in step %s", sk.Route)
			}
		}
	}
	if skipped != 1 {
		t.Fatalf("skipped %d nodes, want 1: %s", skipped, tr)
	}
}

func TestConcurrentRequestsShareOneDiscovery(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, "n", lmtest.NodeOptions{})
	tp := w.transport(t, Config{})
	url := "https://api.test:" + strconv.Itoa(port(n.Addr())) + "/"
	const N = 16
	type res struct {
		body string
		tr   *Trace
		err  error
	}
	ch := make(chan res, N)
	for range N {
		go func() {
			body, tr, err := get(t, tp, url)
			ch <- res{body, tr, err}
		}()
	}
	served := map[RouteStep]int{}
	for range N {
		r := <-ch
		if r.err != nil || r.body != "n HTTP/3.0" {
			t.Fatalf("body %q err %v trace %s", r.body, r.err, r.tr)
		}
		served[r.tr.Served]++
	}
	// Requests that joined the run in flight report the step it found;
	// the metric counts chain runs and route reuses.
	runs := testutilCount(t, w.reg, "veer_lastmile_served_total", map[string]string{"step": "direct"})
	if runs != 1 || served[StepDirect]+served[StepRoute] != N {
		t.Fatalf("%v chain runs, served %v; want one run shared by %d requests", runs, served, N)
	}
	if q := w.public.Queries(); q > 4 {
		t.Fatalf("%d DNS queries for one discovery", q)
	}
}

func TestOnTraceSeesChainRuns(t *testing.T) {
	w := newWorld(t)
	n := w.node(t, "n", lmtest.NodeOptions{})
	var traces []string
	tp := w.transport(t, Config{}, func(o *Options) {
		o.OnTrace = func(tr *Trace) { traces = append(traces, tr.String()) }
	})
	url := "https://api.test:" + strconv.Itoa(port(n.Addr())) + "/"
	mustGet(t, tp, url)
	mustGet(t, tp, url) // reused route: no chain run, no callback
	if len(traces) != 1 || !strings.Contains(traces[0], "served=direct") {
		t.Fatalf("traces %q", traces)
	}
}
