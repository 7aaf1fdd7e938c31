package breaker

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/internal/metrictest"
	"github.com/veerhq/veer/internal/must"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testConfig() Config {
	return Config{Window: 10 * time.Second, Buckets: 10, MinRequests: 10, OpenFor: 5 * time.Second, MaxProbes: 2, ProbeSuccesses: 2}
}

type step struct {
	at        time.Duration
	do        string // ok, fail, admit, hold, deny, finish
	n         int    // ok/fail: outcomes to record; admit: attempts
	kind      outcome.Kind
	err       error // deny: expected error
	admitted  int   // admit: expected admissions
	want      State
	wantLevel int
}

func TestBreakerSteps(t *testing.T) {
	steps := []step{
		{at: 0, do: "ok", n: 10, want: Closed, wantLevel: -1},
		{at: 0, do: "fail", n: 9, want: Closed, wantLevel: -1},                 // 9/19 < 50 %
		{at: 0, do: "fail", n: 1, want: Degraded, wantLevel: 0},                // 10/20 = 50 %
		{at: 0, do: "admit", n: 10, admitted: 5, want: Degraded, wantLevel: 0}, // admit 50 %
		{at: time.Second, do: "fail", n: 20, want: Degraded, wantLevel: 0},     // 30/40 = 75 %
		{at: time.Second, do: "fail", n: 10, want: Degraded, wantLevel: 1},     // 40/50 = 80 %
		{at: time.Second, do: "admit", n: 20, admitted: 2, want: Degraded, wantLevel: 1},
		{at: 2 * time.Second, do: "fail", n: 149, want: Degraded, wantLevel: 1}, // 189/199 < 95 %
		{at: 2 * time.Second, do: "fail", n: 1, want: Open, wantLevel: 2},       // 190/200 = 95 %
		{at: 2 * time.Second, do: "deny", err: ErrOpen, want: Open},
		{at: 7*time.Second - 1, do: "deny", err: ErrOpen, want: Open},
		{at: 7 * time.Second, do: "hold", want: HalfOpen},               // probe 1
		{at: 7 * time.Second, do: "hold", want: HalfOpen},               // probe 2
		{at: 7 * time.Second, do: "deny", err: ErrOpen, want: HalfOpen}, // probe cap
		{at: 7 * time.Second, do: "finish", kind: outcome.Success, want: HalfOpen},
		{at: 7 * time.Second, do: "hold", want: HalfOpen}, // slot freed
		{at: 7 * time.Second, do: "finish", kind: outcome.Success, want: Closed, wantLevel: -1},
		{at: 7 * time.Second, do: "finish", kind: outcome.ServerError, want: Closed, wantLevel: -1}, // stale probe: dropped
		{at: 8 * time.Second, do: "ok", n: 1, want: Closed, wantLevel: -1},
		{at: 8 * time.Second, do: "fail", n: 9, want: Degraded, wantLevel: 1}, // 9/10 = 90 %: admit 10 %
	}
	steps = append(steps,
		step{at: 8 * time.Second, do: "fail", n: 10, want: Open, wantLevel: 2}, // 19/20 = 95 %
		step{at: 13 * time.Second, do: "hold", want: HalfOpen},
		step{at: 13 * time.Second, do: "finish", kind: outcome.ConnectTimeout, want: Open}, // probe failed
		step{at: 13 * time.Second, do: "deny", err: ErrOpen, want: Open},
		step{at: 18 * time.Second, do: "hold", want: HalfOpen},
		step{at: 18 * time.Second, do: "hold", want: HalfOpen},
		step{at: 22 * time.Second, do: "deny", err: ErrOpen, want: HalfOpen},
		step{at: 23 * time.Second, do: "hold", want: HalfOpen},                                 // probes lost: new half-open generation
		step{at: 23 * time.Second, do: "finish", kind: outcome.ServerError, want: HalfOpen},    // stale (old gen)
		step{at: 23 * time.Second, do: "finish", kind: outcome.ServerError, want: HalfOpen},    // stale (old gen)
		step{at: 23 * time.Second, do: "finish", kind: outcome.ClientCanceled, want: HalfOpen}, // ignored, slot freed
		step{at: 23 * time.Second, do: "hold", want: HalfOpen},
		step{at: 23 * time.Second, do: "finish", kind: outcome.ClientError, want: HalfOpen}, // 4xx: dependency fine
		step{at: 23 * time.Second, do: "hold", want: HalfOpen},
		step{at: 23 * time.Second, do: "finish", kind: outcome.Limited, want: Closed, wantLevel: -1}, // 429: fine
		// Window expiry: a degraded level ends when its failures age out.
		step{at: 30 * time.Second, do: "ok", n: 10, want: Closed, wantLevel: -1},
		step{at: 30 * time.Second, do: "fail", n: 10, want: Degraded, wantLevel: 0},
		step{at: 39 * time.Second, do: "admit", n: 2, admitted: 1, want: Degraded, wantLevel: 0},
		step{at: 40 * time.Second, do: "admit", n: 4, admitted: 4, want: Closed, wantLevel: -1},
	)

	reg := prometheus.NewRegistry()
	b := must.Get(New(testConfig(), Options{Clock: clock.NewManual(t0), Registerer: reg, Logger: obs.Discard}))
	// The breaker measures time from its construction; AllowAt times are
	// absolute.
	var held []Ticket
	for i, s := range steps {
		now := t0.Add(s.at)
		switch s.do {
		case "ok", "fail":
			k := outcome.Success
			if s.do == "fail" {
				k = outcome.ServerError
			}
			got := 0
			for tries := 0; got < s.n; tries++ {
				if tries > 100000 {
					t.Fatalf("step %d: could not admit %d requests", i, s.n)
				}
				tk, err := b.AllowAt(now)
				if err != nil {
					continue
				}
				b.DoneAt(now, tk, outcome.Of(k))
				got++
			}
		case "admit":
			got := 0
			for range s.n {
				if _, err := b.AllowAt(now); err == nil {
					got++
				}
			}
			if got != s.admitted {
				t.Errorf("step %d (%v %s): admitted %d of %d, want %d", i, s.at, s.do, got, s.n, s.admitted)
			}
		case "hold":
			tk, err := b.AllowAt(now)
			if err != nil {
				t.Fatalf("step %d (%v hold): %v", i, s.at, err)
			}
			held = append(held, tk)
		case "deny":
			if _, err := b.AllowAt(now); !errors.Is(err, s.err) {
				t.Errorf("step %d (%v deny): err %v, want %v", i, s.at, err, s.err)
			}
		case "finish":
			b.DoneAt(now, held[0], outcome.Of(s.kind))
			held = held[1:]
		}
		st := b.Status()
		if st.State != s.want {
			t.Fatalf("step %d (%v %s): state %v, want %v (status %+v)", i, s.at, s.do, st.State, s.want, st)
		}
		if (s.want == Closed || s.want == Degraded || s.do == "fail") && st.Level != s.wantLevel {
			t.Fatalf("step %d (%v %s): level %d, want %d", i, s.at, s.do, st.Level, s.wantLevel)
		}
	}
	if errs := obs.Lint(reg); len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := metrictest.Sum(t, reg, "veer_breaker_stale_outcomes_total", nil); got != 3 {
		t.Errorf("stale outcomes = %v, want 3", got)
	}
}

func TestDefaultClassify(t *testing.T) {
	cases := []struct {
		o    outcome.Outcome
		want Verdict
	}{
		{outcome.Of(outcome.Success), Success},
		{outcome.Outcome{Kind: outcome.ClientError, Status: 404}, Success},
		{outcome.Outcome{Kind: outcome.Limited, Status: 429}, Success},
		{outcome.Outcome{Kind: outcome.ServerError, Status: 500}, Failure},
		{outcome.Outcome{Kind: outcome.Overloaded, Status: 503}, Failure},
		{outcome.Of(outcome.ConnectRefused), Failure},
		{outcome.Of(outcome.ResponseTimeout), Failure},
		{outcome.Of(outcome.DNSTimeout), Failure},
		{outcome.Of(outcome.ConnectionReset), Failure},
		{outcome.Of(outcome.ClientCanceled), Ignore},
	}
	for _, c := range cases {
		if got := DefaultClassify(c.o); got != c.want {
			t.Errorf("DefaultClassify(%v) = %v, want %v", c.o, got, c.want)
		}
	}
}

func TestCustomClassify(t *testing.T) {
	// A dependency whose 404 means "broken deployment".
	cls := func(o outcome.Outcome) Verdict {
		if o.Status == 404 {
			return Failure
		}
		return DefaultClassify(o)
	}
	m := clock.NewManual(t0)
	b := must.Get(New(Config{MinRequests: 4, Levels: []Level{{FailureRatio: 1, Admit: 0}}}, Options{Clock: m, Classify: cls, Registerer: prometheus.NewRegistry(), Logger: obs.Discard}))
	for range 4 {
		done, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(outcome.Outcome{Kind: outcome.ClientError, Status: 404})
	}
	if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
		t.Fatalf("after four 404s counted as failures: err %v, want ErrOpen", err)
	}
	m.Advance(2 * time.Second)
	if ra := b.RetryAfter(); ra != 3*time.Second {
		t.Fatalf("RetryAfter %v, want 3s of the 5s open period left", ra)
	}
}

func TestAllowDoneNoAlloc(t *testing.T) {
	b := must.Get(New(Config{}, Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard}))
	ok := outcome.Of(outcome.Success)
	allocs := testing.AllocsPerRun(1000, func() {
		done, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(ok)
	})
	if allocs != 0 {
		t.Fatalf("Allow+done allocates %v times, want 0", allocs)
	}
}

func TestConcurrent(t *testing.T) {
	b := must.Get(New(Config{MinRequests: 50}, Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard}))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				done, err := b.Allow()
				if err != nil {
					continue
				}
				k := outcome.Success
				if (g+i)%3 == 0 {
					k = outcome.ServerError
				}
				done(outcome.Of(k))
			}
		})
	}
	wg.Wait()
	st := b.Status()
	// A third of the outcomes fail: below the first level.
	if st.State != Closed {
		t.Fatalf("state %v, want closed (%+v)", st.State, st)
	}
}

func TestValidate(t *testing.T) {
	bad := Config{Window: -1, Levels: []Level{{0.5, 0.5}, {0.4, 0.6}, {1.5, -1}}}
	err := bad.Validate()
	for _, f := range []string{"window", "levels[1].failure_ratio", "levels[1].admit", "levels[2].failure_ratio", "levels[2].admit"} {
		if err == nil || !containsField(err, f) {
			t.Errorf("Validate: missing error for %s in %v", f, err)
		}
	}
	var zero Config
	if err := zero.Validate(); err != nil {
		t.Fatalf("zero config invalid: %v", err)
	}
}

func containsField(err error, field string) bool {
	type fieldErr interface{ Unwrap() []error }
	var all []error
	if j, ok := err.(fieldErr); ok {
		all = j.Unwrap()
	} else {
		all = []error{err}
	}
	for _, e := range all {
		if fe, ok := e.(interface{ Error() string }); ok && len(fe.Error()) >= len(field) && fe.Error()[:len(field)] == field {
			return true
		}
	}
	return false
}

func ExampleBreaker() {
	m := clock.NewManual(t0)
	b, err := New(Config{MinRequests: 4}, Options{Clock: m, Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, k := range []outcome.Kind{outcome.Success, outcome.ServerError, outcome.ServerError, outcome.ServerError} {
		done, _ := b.Allow()
		done(outcome.Of(k))
	}
	fmt.Println(b.Status().State, b.Status().Admit)
	_, err = b.Allow()
	fmt.Println(err)
	_, err = b.Allow()
	fmt.Println(err)
	// Output:
	// degraded 0.5
	// breaker: rejected by partial admission
	// <nil>
}

func BenchmarkAllowDone(b *testing.B) {
	br := must.Get(New(Config{}, Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard}))
	ok := outcome.Of(outcome.Success)
	b.ReportAllocs()
	for b.Loop() {
		done, err := br.Allow()
		if err == nil {
			done(ok)
		}
	}
}

// BenchmarkAllowDoneAt measures the decision core without clock reads
// (time.Now costs ~80 ns on a kvm-clock VM).
func BenchmarkAllowDoneAt(b *testing.B) {
	br := must.Get(New(Config{}, Options{Clock: clock.NewManual(t0), Registerer: prometheus.NewRegistry(), Logger: obs.Discard}))
	ok := outcome.Of(outcome.Success)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		tk, err := br.AllowAt(now)
		if err == nil {
			br.DoneAt(now, tk, ok)
		}
	}
}
