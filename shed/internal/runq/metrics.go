package runq

import "github.com/prometheus/client_golang/prometheus"

// collector exports the run-queue yields (Yield) as
// veer_shed_run_queue_yields_total{kind}: "poll" waited for a network poll
// of its own, "join" shared one another yield waited for, "gosched" fell
// back to runtime.Gosched. The counts are the process's (the yield is
// process-wide), whichever Shedder's registry exports them.
type collector struct{ desc *prometheus.Desc }

// NewCollector returns a collector of the process's yields: register one
// per registry (two Shedders on one registry share it: obs.Register).
func NewCollector() prometheus.Collector {
	return &collector{desc: prometheus.NewDesc("veer_shed_run_queue_yields_total",
		"Admitted requests that yielded the processor before their handler while the run queue was busy, by how they waited (poll, join, gosched); process-wide.",
		[]string{"kind"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(yieldPolls.Load()), "poll")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(yieldJoins.Load()), "join")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(yieldFallbacks.Load()), "gosched")
}

var _ prometheus.Collector = (*collector)(nil)
