package guard

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/limit"
)

// The comparisons with peers live in micro.go, shared with cmd/guardbench.

func BenchmarkLimitVeer1Dim(b *testing.B) { LimitVeer1Dim(b) }

func BenchmarkLimitXTimeRate(b *testing.B) { LimitXTimeRate(b) }

func BenchmarkLimitXTimeRateKeyed(b *testing.B) { LimitXTimeRateKeyed(b) }

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

func BenchmarkBreakerVeer(b *testing.B) { BreakerVeer(b) }

func BenchmarkBreakerGobreaker(b *testing.B) { BreakerGobreaker(b) }
