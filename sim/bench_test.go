package sim

import (
	"context"
	"testing"
	"time"

	"github.com/veerhq/veer/failover"
)

// BenchmarkRequests measures simulated regular requests per second on one
// goroutine, every strategy of Strategies() (four real policies), default mix: generation of the
// session, the event loop, the policies and the metrics.
func BenchmarkRequests(b *testing.B) {
	sc, err := LoadBundled("default")
	if err != nil {
		b.Fatal(err)
	}
	m, err := compile(sc, "")
	if err != nil {
		b.Fatal(err)
	}
	strategies := Strategies()
	makers := make([]func() failover.Policy, len(strategies))
	for i, s := range strategies {
		makers[i] = func() failover.Policy {
			p, _ := s.New(sc.PolicyConfig())
			return p
		}
	}
	w := newWorker(m, len(strategies), len(ConditionNames)+len(sc.Carriers)+len(sc.Traffic))
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime()
	var reqs int64
	for i := 0; b.Loop(); i++ {
		w.session(1, i, makers)
		reqs += int64(len(w.real.reqs) * len(strategies))
	}
	b.ReportMetric(float64(reqs)/time.Since(start).Seconds(), "req/s")
	if c := cpuTime() - cpu; c > 0 {
		b.ReportMetric(float64(reqs)/c.Seconds(), "req/cpu-s")
	}
	b.ReportMetric(float64(reqs)/float64(b.N), "req/op")
}

// BenchmarkFig1 runs the fig1 scenario: 10,000 sessions of 30 minutes under
// every strategy of Strategies(), on GOMAXPROCS workers.
func BenchmarkFig1(b *testing.B) {
	sc, err := LoadBundled("fig1")
	if err != nil {
		b.Fatal(err)
	}
	var reqs int64
	start, cpu := time.Now(), cpuTime()
	for b.Loop() {
		res, err := Run(context.Background(), sc, Strategies(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range res.Strategies {
			reqs += s.Requests
		}
	}
	b.ReportMetric(float64(reqs)/time.Since(start).Seconds(), "req/s")
	if c := cpuTime() - cpu; c > 0 {
		b.ReportMetric(float64(reqs)/c.Seconds(), "req/cpu-s")
	}
}
