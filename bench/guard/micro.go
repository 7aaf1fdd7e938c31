package guard

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/veerhq/veer/breaker"
	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

// The side-by-side microbenchmarks, shared by this package's Benchmark
// functions (benchstat form) and cmd/guardbench (alternating rounds). The
// limiters decide at an explicit time (no clock read), with a limit high
// enough that every request is admitted.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// LimitVeer1Dim is veer's local limit decision on one dimension.
func LimitVeer1Dim(b *testing.B) {
	l, _ := limit.New(limit.Config{Dimensions: []limit.Dimension{{Name: "tenant", Default: limit.Limits{Rate: 1e9, Burst: 1000}}}},
		limit.Options{Clock: clock.NewManual(t0), Registerer: prometheus.NewRegistry()})
	keys := []string{"acme"}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		if !l.AllowAt(now, keys).Allowed {
			b.Fatal("rejected")
		}
	}
}

// LimitXTimeRate is one unkeyed x/time/rate limiter.
func LimitXTimeRate(b *testing.B) {
	l := rate.NewLimiter(1e9, 1000)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		if !l.AllowN(now, 1) {
			b.Fatal("rejected")
		}
	}
}

// LimitXTimeRateKeyed is x/time/rate per key: x/time/rate has no keys, so a
// keyed limiter needs a map under a RWMutex in front of it.
func LimitXTimeRateKeyed(b *testing.B) {
	var mu sync.RWMutex
	m := map[string]*rate.Limiter{}
	get := func(key string) *rate.Limiter {
		mu.RLock()
		l := m[key]
		mu.RUnlock()
		if l != nil {
			return l
		}
		mu.Lock()
		defer mu.Unlock()
		if l = m[key]; l == nil {
			l = rate.NewLimiter(1e9, 1000)
			m[key] = l
		}
		return l
	}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		if !get("acme").AllowN(now, 1) {
			b.Fatal("rejected")
		}
	}
}

// BreakerVeer is veer's breaker Allow + done with the wall clock.
func BreakerVeer(b *testing.B) {
	br, err := breaker.New(breaker.Config{}, breaker.Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
	if err != nil {
		b.Fatal(err)
	}
	ok := outcome.Of(outcome.Success)
	b.ReportAllocs()
	for b.Loop() {
		done, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(ok)
	}
}

// BreakerGobreaker is sony/gobreaker v2's TwoStepCircuitBreaker.
func BreakerGobreaker(b *testing.B) {
	br := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{Name: "bench"})
	b.ReportAllocs()
	for b.Loop() {
		done, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(nil)
	}
}
