package guard

import (
	"context"
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

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Both limiters decide at an explicit time (no clock read), with a limit
// high enough that every request is admitted.

func BenchmarkLimitVeer1Dim(b *testing.B) {
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

func BenchmarkLimitXTimeRate(b *testing.B) {
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

// x/time/rate has no keys: a per-key limiter needs a map in front of it.
func BenchmarkLimitXTimeRateKeyed(b *testing.B) {
	m := map[string]*rate.Limiter{"acme": rate.NewLimiter(1e9, 1000)}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		if !m["acme"].AllowN(now, 1) {
			b.Fatal("rejected")
		}
	}
}

func BenchmarkLimitVeer3DimsConcurrency(b *testing.B) {
	l, _ := limit.New(limit.Config{Dimensions: []limit.Dimension{
		{Name: "region", Default: limit.Limits{Rate: 1e9, Burst: 1000}},
		{Name: "tenant", Default: limit.Limits{Rate: 1e9, Burst: 1000, Concurrency: 100}},
		{Name: "api", Default: limit.Limits{Rate: 1e9, Burst: 1000}},
	}}, limit.Options{Clock: clock.NewManual(t0), Registerer: prometheus.NewRegistry()})
	keys := []string{"eu", "acme", "invoke"}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		r := l.AllowAt(now, keys)
		r.Permit.Release()
	}
}

// With the wall clock: x/time/rate reads time.Now; veer's Admit reads the
// monotonic clock only (clock.Since).

func BenchmarkLimitVeerWallClock(b *testing.B) {
	l, _ := limit.New(limit.Config{Dimensions: []limit.Dimension{{Name: "tenant", Default: limit.Limits{Rate: 1e9, Burst: 1000}}}},
		limit.Options{Registerer: prometheus.NewRegistry()})
	keys := []string{"acme"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l.Admit(ctx, keys)
	}
}

func BenchmarkLimitXTimeRateWallClock(b *testing.B) {
	l := rate.NewLimiter(1e9, 1000)
	b.ReportAllocs()
	for b.Loop() {
		l.Allow()
	}
}

func BenchmarkBreakerVeer(b *testing.B) {
	br := breaker.New(breaker.Config{}, breaker.Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
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

func BenchmarkBreakerGobreaker(b *testing.B) {
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
