package breaker

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/internal/must"
	"github.com/veerhq/veer/outcome"
)

func TestThrottleSteps(t *testing.T) {
	var u float64
	th := must.Get(NewThrottle(ThrottleConfig{Window: time.Minute, Buckets: 6}, ThrottleOptions{
		Clock: clock.NewManual(t0), Rand: func() float64 { return u }, Registerer: prometheus.NewRegistry(),
	}))
	steps := []struct {
		at       time.Duration
		u        float64
		n        int
		kind     outcome.Kind
		wantP    float64 // RejectProbability after the step
		rejected int
	}{
		// 10 accepted: requests 10, accepts 10: p = max(0, (10-20)/11) = 0.
		{at: 0, u: 0, n: 10, kind: outcome.Success, wantP: 0},
		// 10 rejected by the backend (503): requests 20, accepts 10: p = 0.
		{at: time.Second, u: 0, n: 10, kind: outcome.Overloaded, wantP: 0},
		// 10 more 503s: requests 30, accepts 10: p = 10/31.
		{at: 2 * time.Second, u: 0.99, n: 10, kind: outcome.Overloaded, wantP: 10.0 / 31},
		// Draws below p are rejected locally; they still count as requests
		// (the SRE definition), so p keeps rising: 11/32, 12/33.
		{at: 2 * time.Second, u: 0.3, n: 2, rejected: 2, wantP: 12.0 / 33},
		// 429 is an accept: requests 35, accepts 13: p = (35-26)/36.
		{at: 3 * time.Second, u: 0.99, n: 3, kind: outcome.Limited, wantP: 9.0 / 36},
		// A minute later the window has rolled over: p = 0.
		{at: 63 * time.Second, u: 0, n: 0, wantP: 0},
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		u = s.u
		rej := 0
		for range s.n {
			if err := th.AllowAt(now); err != nil {
				if !errors.Is(err, ErrThrottled) {
					t.Fatal(err)
				}
				rej++
				continue
			}
			th.DoneAt(now, outcome.Of(s.kind))
		}
		if rej != s.rejected {
			t.Errorf("step %d: rejected %d, want %d", i, rej, s.rejected)
		}
		if p := th.RejectProbability(now); math.Abs(p-s.wantP) > 1e-9 {
			t.Errorf("step %d: p = %v, want %v", i, p, s.wantP)
		}
	}
}

func TestThrottleValidate(t *testing.T) {
	c := ThrottleConfig{K: 0.5}
	if err := c.Validate(); err == nil {
		t.Fatal("K = 0.5 accepted")
	}
}

func FuzzConfig(f *testing.F) {
	f.Add([]byte("window: 10s\nmin_requests: 20\nlevels:\n  - {failure_ratio: 0.5, admit: 0.5}\n  - {failure_ratio: 0.95, admit: 0}\n"))
	f.Add([]byte(`{"open_for": "5s", "max_probes": 2}`))
	f.Add([]byte("levels: [{failure_ratio: 2}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		if err := config.Parse(data, "fuzz.yaml", &c); err != nil {
			return
		}
		// A config that validates must build a working breaker.
		b := must.Get(New(c, Options{Clock: clock.NewManual(t0), Registerer: prometheus.NewRegistry()}))
		for range 3 {
			if tk, err := b.AllowAt(t0); err == nil {
				b.DoneAt(t0, tk, outcome.Of(outcome.ServerError))
			}
		}
		var tc ThrottleConfig
		_ = config.Parse(data, "fuzz.yaml", &tc)
	})
}
