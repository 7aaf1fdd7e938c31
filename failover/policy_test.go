package failover

import (
	"testing"
	"time"

	"github.com/veerhq/veer/outcome"
)

func TestUberDefaults(t *testing.T) {
	p, err := NewUber(Config{Primary: "a.example", Backups: []string{"b.example"}})
	if err != nil {
		t.Fatal(err)
	}
	n := None
	runSteps(t, p, []step{
		{0, start(n), Primary, 0, n, noWake, ReasonNone},
		{0, rep(0, refused), Primary, 0, n, DefaultFailureTimeout, ReasonNone},
		{0, rep(0, refused), Primary, 0, n, DefaultFailureTimeout, ReasonNone},
		{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
		{0, can(1, refused), Failover, 0, n, DefaultCanaryRetryInterval, ReasonNone},
		{DefaultCanaryRetryInterval, tick(), Failover, 0, 1, noWake, ReasonNone},
		{DefaultCanaryRetryInterval, can(1, ok), Backup, 1, n, DefaultCanaryRetryInterval + DefaultRecoveryTimeout, ReasonCanarySuccess},
	})
	if got, want := p.RecoveryAt(), t0.Add(DefaultCanaryRetryInterval+DefaultRecoveryTimeout); !got.Equal(want) {
		t.Fatalf("RecoveryAt %v, want %v", got, want)
	}
}

func TestRecoveryDelayCap(t *testing.T) {
	cfg := testConfig()
	cfg.RecoveryTimeout, cfg.RecoveryTimeoutStep, cfg.RecoveryTimeoutMax = sec(10), sec(15), sec(50)
	u, err := NewUber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range []time.Duration{sec(10), sec(10), sec(25), sec(40), sec(50), sec(50), sec(50)} {
		if got := u.recoveryDelay(k); got != want {
			t.Errorf("recoveryDelay(%d) = %v, want %v", k, got, want)
		}
	}
	if got := u.recoveryDelay(1 << 40); got != sec(50) {
		t.Errorf("recoveryDelay(huge) = %v, want the cap", got)
	}
}

func TestRetryDelay(t *testing.T) {
	for _, c := range []struct {
		interval, max time.Duration
		want          []time.Duration
	}{
		{sec(5), sec(30), []time.Duration{sec(5), sec(10), sec(20), sec(30), sec(30)}},
		{sec(5), sec(5), []time.Duration{sec(5), sec(5), sec(5)}},
		{sec(3), sec(7), []time.Duration{sec(3), sec(6), sec(7), sec(7)}},
		{1 << 62, 1<<63 - 1, []time.Duration{1 << 62, 1<<63 - 1, 1<<63 - 1}},
	} {
		cfg := testConfig()
		cfg.CanaryRetryInterval, cfg.CanaryRetryMax = c.interval, c.max
		u, err := NewUber(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range c.want {
			if got := u.retryDelay(k); got != want {
				t.Errorf("%v..%v: retryDelay(%d) = %v, want %v", c.interval, c.max, k, got, want)
			}
		}
		if got := u.retryDelay(1 << 40); got != c.max {
			t.Errorf("%v..%v: retryDelay(huge) = %v, want the cap", c.interval, c.max, got)
		}
	}
}

// TestReportDoesNotAllocate: the simulator calls Report millions of times.
func TestReportDoesNotAllocate(t *testing.T) {
	for name, mk := range policies() {
		t.Run(name, func(t *testing.T) {
			p := mk(t)
			now := t0
			p.Start(now, None)
			kinds := []outcome.Kind{ok, refused, ok, refused, refused, srvError, refused, refused, refused}
			i := 0
			allocs := testing.AllocsPerRun(1000, func() {
				now = now.Add(time.Millisecond)
				a := p.Report(now, p.Domain(), outcome.Of(kinds[i%len(kinds)]))
				if a.Canary != None {
					p.CanaryDone(now, a.Canary, outcome.Of(ok))
				}
				p.Tick(now)
				i++
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per Report, want 0", allocs)
			}
		})
	}
}

func policies() map[string]func(testing.TB) Policy {
	return map[string]func(testing.TB) Policy{
		"uber": func(tb testing.TB) Policy {
			p, err := NewUber(testConfig())
			if err != nil {
				tb.Fatal(err)
			}
			return p
		},
		"round_robin": func(tb testing.TB) Policy {
			p, err := NewRoundRobin(testConfig())
			if err != nil {
				tb.Fatal(err)
			}
			return p
		},
		"uber_confirm": func(tb testing.TB) Policy {
			cfg := testConfig()
			cfg.ConfirmPrimary = true
			p, err := NewUber(cfg)
			if err != nil {
				tb.Fatal(err)
			}
			return p
		},
		"threshold": func(tb testing.TB) Policy {
			p, err := NewThreshold(testConfig())
			if err != nil {
				tb.Fatal(err)
			}
			return p
		},
	}
}

func BenchmarkPolicyReport(b *testing.B) {
	for _, name := range []string{"uber", "round_robin", "threshold"} {
		b.Run(name, func(b *testing.B) {
			p := policies()[name](b)
			now := t0
			p.Start(now, None)
			kinds := [8]outcome.Kind{ok, ok, ok, ok, ok, ok, ok, refused}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				now = now.Add(time.Millisecond)
				a := p.Report(now, p.Domain(), outcome.Of(kinds[i&7]))
				if a.Canary != None {
					p.CanaryDone(now, a.Canary, outcome.Of(ok))
				}
			}
		})
	}
}

func BenchmarkNewUber(b *testing.B) {
	cfg := testConfig()
	b.ReportAllocs()
	for b.Loop() {
		p, err := NewUber(cfg)
		if err != nil {
			b.Fatal(err)
		}
		p.Start(t0, None)
	}
}
