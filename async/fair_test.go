package async

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

// run records, in a synctest bubble, when each invocation started
// (virtual time since the bubble began) and from which tenant.
type runLog struct {
	mu     sync.Mutex
	t0     time.Time
	start  map[string]time.Duration // id -> attempt start
	order  []string                 // tenants in start order
	submit map[string]time.Duration // id -> submission
	tenant map[string]string
}

func newRunLog() *runLog {
	return &runLog{t0: time.Now(), start: map[string]time.Duration{}, submit: map[string]time.Duration{}, tenant: map[string]string{}}
}

// dispatcher takes cost per attempt; for tenants in hang it blocks until
// the attempt's context ends.
func (l *runLog) dispatcher(cost time.Duration, hang ...string) Dispatcher {
	return DispatcherFunc(func(ctx context.Context, req *http.Request, inv *Invocation) (*http.Response, error) {
		l.mu.Lock()
		l.start[inv.ID] = time.Since(l.t0)
		l.order = append(l.order, inv.Tenant)
		l.mu.Unlock()
		if slices.Contains(hang, inv.Tenant) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		time.Sleep(cost) // the upstream's work, in virtual time
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	})
}

func (l *runLog) submitTo(t *testing.T, s *Service, tenant string) {
	t.Helper()
	id, _, err := s.Submit(context.Background(), &Invocation{Tenant: tenant, Method: "POST", Host: "h", Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.submit[id] = time.Since(l.t0)
	l.tenant[id] = tenant
	l.mu.Unlock()
}

// delays returns tenant's queueing delays (submission to attempt start),
// sorted.
func (l *runLog) delays(tenant string) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for id, tn := range l.tenant {
		if st, ok := l.start[id]; ok && tn == tenant {
			out = append(out, st-l.submit[id])
		}
	}
	slices.Sort(out)
	return out
}

func p99(ds []time.Duration) time.Duration { return ds[(len(ds)*99+99)/100-1] }

func newSvc(t *testing.T, cfg Config, eng Engine, d Dispatcher) *Service {
	t.Helper()
	s, err := New(cfg, eng, d, Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	return s
}

// fairScenario: tenant b submits one invocation a second for 20 s; with
// noisy, tenant a dumps a backlog of 10× b's total at the start. Two
// workers, 100 ms per attempt.
func fairScenario(t *testing.T, noisy bool) []time.Duration {
	var out []time.Duration
	synctest.Test(t, func(t *testing.T) {
		l := newRunLog()
		s := newSvc(t, Config{Groups: []Group{{Name: DefaultGroup, Concurrency: 2}}}, newMemEngine(), l.dispatcher(100*time.Millisecond))
		if noisy {
			for range 200 {
				l.submitTo(t, s, "a")
			}
		}
		for range 20 {
			l.submitTo(t, s, "b")
			time.Sleep(time.Second)
		}
		time.Sleep(30 * time.Second) // virtual: let the backlog drain
		synctest.Wait()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		out = l.delays("b")
		if len(out) != 20 {
			t.Fatalf("b ran %d of 20", len(out))
		}
		if noisy && len(l.delays("a")) != 200 {
			t.Fatalf("a ran %d of 200", len(l.delays("a")))
		}
	})
	return out
}

// TestFairTenants: a tenant with a 10× backlog does not delay another
// beyond one consumption interval: b's p99 queueing delay beside a's
// backlog is within PollInterval + one attempt of its delay alone (FIFO
// would put b behind a's 200 × 100 ms / 2 workers = 10 s).
func TestFairTenants(t *testing.T) {
	alone := fairScenario(t, false)
	noisy := fairScenario(t, true)
	bound := DefaultPollInterval + 100*time.Millisecond
	if p99(noisy) > p99(alone)+bound {
		t.Fatalf("b's p99 delay %v beside a's backlog, %v alone: more than %v apart (delays %v)", p99(noisy), p99(alone), bound, noisy)
	}
	t.Logf("b's p99 queueing delay: alone %v, beside a 10x backlog %v", p99(alone), p99(noisy))
}

// isolationScenario: tenant fast (group general, 4 workers) submits an
// invocation every 200 ms for 10 s; with hang, tenant slow (dedicated
// group, 2 workers) submits 50 whose upstream never answers.
func isolationScenario(t *testing.T, hang bool) []time.Duration {
	var out []time.Duration
	synctest.Test(t, func(t *testing.T) {
		l := newRunLog()
		cfg := Config{AttemptTimeout: time.Minute, Groups: []Group{{Name: DefaultGroup, Concurrency: 4}, {Name: "dedicated", Concurrency: 2, Tenants: []string{"slow"}}}}
		s := newSvc(t, cfg, newMemEngine("dedicated"), l.dispatcher(300*time.Millisecond, "slow"))
		if hang {
			for range 50 {
				l.submitTo(t, s, "slow")
			}
		}
		for range 50 {
			l.submitTo(t, s, "fast")
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		out = l.delays("fast")
		if len(out) != 50 {
			t.Fatalf("fast ran %d of 50", len(out))
		}
		stuck := len(l.delays("slow"))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if hang && stuck != 2 {
			t.Fatalf("slow started %d attempts, want its group's 2 workers stuck", stuck)
		}
	})
	return out
}

// TestGroupIsolation: a group whose upstream hangs does not slow
// another: the general group's queueing delays are the same with and
// without the dedicated group's hung invocations.
func TestGroupIsolation(t *testing.T) {
	alone := isolationScenario(t, false)
	beside := isolationScenario(t, true)
	if p99(beside) > p99(alone)+p99(alone)/10 {
		t.Fatalf("fast's p99 %v beside a hung group, %v alone", p99(beside), p99(alone))
	}
}

// TestTenantRate: with tenant_rate 2/s (burst 1) a tenant's 10
// invocations start 500 ms apart, while another tenant's run at once.
func TestTenantRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newRunLog()
		s := newSvc(t, Config{TenantRate: 2, Groups: []Group{{Name: DefaultGroup, Concurrency: 4}}}, newMemEngine(), l.dispatcher(0))
		for range 10 {
			l.submitTo(t, s, "limited")
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		d := l.delays("limited")
		if len(d) != 10 {
			t.Fatalf("ran %d of 10", len(d))
		}
		for i := 1; i < len(d); i++ {
			if gap := d[i] - d[i-1]; gap < 500*time.Millisecond {
				t.Fatalf("starts %v: %v apart, want >= 500ms at 2/s", d, gap)
			}
		}
		if d[9] > 5*time.Second {
			t.Fatalf("last start %v: slower than the rate", d[9])
		}
	})
}

// TestPauseResume: a paused tenant's invocations wait; another tenant's
// run; resumed, they run.
func TestPauseResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newRunLog()
		s := newSvc(t, Config{}, newMemEngine(), l.dispatcher(0))
		must(t, s.Pause(context.Background(), "", "p"))
		l.submitTo(t, s, "p")
		l.submitTo(t, s, "q")
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(l.delays("p")) != 0 || len(l.delays("q")) != 1 {
			t.Fatalf("paused: p ran %d, q %d", len(l.delays("p")), len(l.delays("q")))
		}
		must(t, s.Resume(context.Background(), "", "p"))
		must(t, s.Pause(context.Background(), DefaultGroup, ""))
		l.submitTo(t, s, "q")
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(l.delays("p")) != 0 || len(l.delays("q")) != 1 {
			t.Fatalf("group paused: p ran %d, q %d", len(l.delays("p")), len(l.delays("q")))
		}
		must(t, s.Resume(context.Background(), DefaultGroup, ""))
		time.Sleep(time.Second)
		synctest.Wait()
		if len(l.delays("p")) != 1 || len(l.delays("q")) != 2 {
			t.Fatalf("resumed: p ran %d, q %d", len(l.delays("p")), len(l.delays("q")))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
