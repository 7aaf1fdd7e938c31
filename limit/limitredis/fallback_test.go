package limitredis

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/internal/redistest"
	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/obs"
)

func TestFallbackWhenRedisDies(t *testing.T) {
	srv := redistest.Start(t)
	fallbackScenario(t, srv, srv.Kill, srv.Restart)
}

// TestFallbackWhenRedisHangs freezes Redis (SIGSTOP): connections stay
// open and nothing answers, so only the decision timeout detects it.
func TestFallbackWhenRedisHangs(t *testing.T) {
	srv := redistest.Start(t)
	fallbackScenario(t, srv, srv.Pause, srv.Resume)
}

// fallbackScenario hammers 4 instances, applies fault after 1 s, checks the
// fallback and the absence of an unlimited window, then heals Redis and
// waits for every instance to recover.
func fallbackScenario(t *testing.T, srv *redistest.Server, fault, heal func()) {
	const rate, burst = 400.0, 40
	var mu sync.Mutex
	var fellBack [4]time.Time // last switch to fallback per instance
	changed := make(chan bool, 64)
	cfg := Config{Instances: 4, Timeout: 300 * time.Millisecond, ProbeInterval: 100 * time.Millisecond, Limits: limit.Config{Dimensions: []limit.Dimension{{Name: "tenant", Default: limit.Limits{Rate: rate, Burst: burst}}}}}
	var ls []*Limiter
	var regs []*prometheus.Registry
	for i := range 4 {
		l, reg := newLimiter(t, cfg, srv.Addr(), Options{OnFallback: func(fb bool) {
			mu.Lock()
			if fb {
				fellBack[i] = time.Now()
			}
			mu.Unlock()
			changed <- fb
		}})
		ls = append(ls, l)
		regs = append(regs, reg)
	}
	// Admissions per 100 ms slot of wall time, across the instances, to
	// show there is no unlimited window.
	// The fault comes after 1 s and the run ends 2 s after the fault,
	// however late a busy machine fires the timers. An instance that had
	// already fallen back (a decision timed out under load before the
	// fault) is in fallback at the fault: nothing to switch.
	start := time.Now()
	var slots [128]atomic.Int64
	stop := make(chan struct{})
	var killedAt, stopAt time.Time
	var wasInFallback [4]bool
	faulted := make(chan struct{})
	time.AfterFunc(time.Second, func() {
		for i, l := range ls {
			wasInFallback[i] = l.InFallback()
		}
		killedAt = time.Now()
		fault()
		close(faulted)
		time.AfterFunc(2*time.Second, func() { stopAt = time.Now(); close(stop) })
	})
	hammer(ls, 2, []string{"acme"}, stop, func(_ int, r limit.Result) {
		if r.Allowed {
			if s := int(time.Since(start) / (100 * time.Millisecond)); s < len(slots) {
				slots[s].Add(1)
			}
		}
	})
	<-faulted
	if late := time.Since(stopAt); late > time.Second {
		t.Errorf("the last decision ended %v after the run's end: Admit blocked", late)
	}
	mu.Lock()
	fb := fellBack
	mu.Unlock()
	for i, at := range fb {
		if wasInFallback[i] {
			continue
		}
		if d := at.Sub(killedAt); d < 0 || d > time.Second {
			t.Errorf("instance %d fell back %v after Redis died, want ≤ 1 s", i, d)
		}
	}
	// Never unlimited: in any 100 ms slot the fleet admits at most the
	// burst plus 100 ms of rate, with Redis (shared) or without it
	// (4 × burst/4 plus 4 × rate/4 per instance). The slot of the switch
	// may hold Redis's admissions and the locals' fresh bursts and rate:
	// 2 × burst + 2 × 100 ms of rate at worst.
	maxSlot := int64(0)
	var total int64
	for i := range slots {
		n := slots[i].Load()
		total += n
		maxSlot = max(maxSlot, n)
	}
	if limitPerSlot := int64(2*burst + 2*rate/10); maxSlot > limitPerSlot {
		t.Fatalf("a 100 ms slot admitted %d, more than %d", maxSlot, limitPerSlot)
	}
	run := stopAt.Sub(start).Seconds()
	if upper := int64(3*burst + rate*(run+0.2)); total > upper {
		t.Fatalf("admitted %d in %.1f s, over %d", total, run, upper)
	}
	for _, l := range ls {
		if !l.InFallback() {
			t.Fatal("instance not in fallback while Redis is down")
		}
	}
	t.Logf("fallback delays after kill: %v; admitted %d; max per 100 ms %d", func() []time.Duration {
		var ds []time.Duration
		for _, at := range fb {
			ds = append(ds, at.Sub(killedAt))
		}
		return ds
	}(), total, maxSlot)

	// Redis returns: every instance recovers through its probe.
	for len(changed) > 0 {
		<-changed
	}
	heal()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for back := 0; back < 4; {
		select {
		case v := <-changed:
			if !v {
				back++
			}
		case <-timeout.C:
			t.Fatalf("only %d of 4 instances recovered within 10 s", back)
		}
	}
	if r := ls[0].Admit(context.Background(), []string{"acme"}); !r.Allowed {
		t.Fatal("fresh Redis rejected the first request")
	}
	if ls[0].InFallback() {
		t.Fatal("decision after recovery was local")
	}
	for i, reg := range regs {
		fb, rec := metricValue(t, reg, "veer_limitredis_fallbacks_total"), metricValue(t, reg, "veer_limitredis_recoveries_total")
		if fb < 1 || rec != fb {
			t.Errorf("instance %d: fallbacks %v recoveries %v, want as many recoveries as fallbacks", i, fb, rec)
		}
		if errs := obs.Lint(reg); len(errs) > 0 {
			t.Error(errs)
		}
	}
}

func TestFallbackUnreachableFromStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	l, reg := newLimiter(t, Config{Instances: 4, Limits: limit.Config{Dimensions: []limit.Dimension{{Name: "tenant", Default: limit.Limits{Rate: 0.01, Burst: 8, Concurrency: 8}}}}}, addr, Options{})
	got := 0
	for range 10 {
		if r := l.Admit(context.Background(), []string{"acme"}); r.Allowed {
			got++
		}
	}
	if got != 2 {
		t.Fatalf("admitted %d with Redis down, want 8 ÷ 4 = 2 (never unlimited)", got)
	}
	if !l.InFallback() {
		t.Fatal("not in fallback")
	}
	if errs := obs.Lint(reg); len(errs) > 0 {
		t.Fatal(errs)
	}
}
