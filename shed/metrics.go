package shed

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/shed/internal/runq"
	"github.com/veerhq/veer/tier"
)

// metrics are labelled by endpoint (bounded by MaxEndpoints), tier (4) and
// reason (4); never by caller.
type metrics struct {
	waits *waitCollector
	state *stateCollector
	shed  *prometheus.CounterVec
	held  *prometheus.CounterVec // refusals held in a storm (pace.go)
}

func newMetrics(reg prometheus.Registerer) *metrics {
	obs.Register(reg, runq.NewCollector())
	return &metrics{
		waits: obs.Register(reg, newWaitCollector()),
		state: obs.Register(reg, newStateCollector()),
		shed: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_shed_shed_total",
			Help: "Requests shed, by endpoint, tier and reason (overload, tier, queue_full, deadline).",
		}, []string{"endpoint", "tier", "reason"})),
		held: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_shed_held_refusals_total",
			Help: "Refusals held before they were written, by endpoint: a rejection storm being paced (see reject_hold).",
		}, []string{"endpoint"})),
	}
}

// stageMetrics are the series of one endpoint, resolved once so the request
// path does no label lookups.
type stageMetrics struct {
	wait [tier.CriticalPlus + 1]*waitHist // admitted requests and their waits
	shed [tier.CriticalPlus + 1][numReasons]prometheus.Counter
	held prometheus.Counter
}

// admitted is the number of requests the stage has admitted so far.
func (sm *stageMetrics) admitted() uint64 {
	var n uint64
	for _, h := range sm.wait {
		if h != nil {
			n += h.count()
		}
	}
	return n
}

func (m *metrics) forEndpoint(name string) *stageMetrics {
	sm := &stageMetrics{held: m.held.WithLabelValues(name)}
	for _, t := range tier.All {
		ts := t.String()
		sm.wait[t] = m.waits.hist(name, t)
		for r := Reason(0); r < numReasons; r++ {
			sm.shed[t][r] = m.shed.WithLabelValues(name, ts, r.String())
		}
	}
	return sm
}

// waitBuckets are the upper bounds (seconds) of the queue wait histogram.
var waitBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// waitHist counts the admitted requests of one endpoint and tier by queue
// wait, in plain atomics: the unloaded path adds one to the first bucket and
// nothing else (a prometheus Histogram plus an admitted Counter cost four
// contended atomic operations per request). waitCollector exports it as
// veer_shed_queue_wait_seconds and, from the same counts,
// veer_shed_admitted_total.
type waitHist struct {
	buckets [12]atomic.Uint64 // len(waitBuckets) + the +Inf overflow
	sumNs   atomic.Int64
}

func (h *waitHist) observeZero() { h.buckets[0].Add(1) }

// count is the number of observations so far.
func (h *waitHist) count() uint64 {
	var n uint64
	for i := range h.buckets {
		n += h.buckets[i].Load()
	}
	return n
}

func (h *waitHist) observe(d time.Duration) {
	s := d.Seconds()
	i := sort.SearchFloat64s(waitBuckets, s) // first bound >= s
	h.buckets[i].Add(1)
	h.sumNs.Add(int64(d))
}

type histKey struct {
	endpoint string
	tier     tier.Tier
}

// waitCollector exports every waitHist registered with it. Shedders that
// share a registry share the collector (obs.Register), and series of the
// same endpoint and tier are summed.
type waitCollector struct {
	admittedDesc, waitDesc *prometheus.Desc

	mu    sync.Mutex
	hists map[histKey][]*waitHist
}

func newWaitCollector() *waitCollector {
	return &waitCollector{
		admittedDesc: prometheus.NewDesc("veer_shed_admitted_total",
			"Requests admitted to their handler, by endpoint and tier.", []string{"endpoint", "tier"}, nil),
		waitDesc: prometheus.NewDesc("veer_shed_queue_wait_seconds",
			"Wait from arrival to handler start of admitted requests, by endpoint and tier.", []string{"endpoint", "tier"}, nil),
		hists: map[histKey][]*waitHist{},
	}
}

func (c *waitCollector) hist(endpoint string, t tier.Tier) *waitHist {
	h := &waitHist{}
	c.mu.Lock()
	k := histKey{endpoint, t}
	c.hists[k] = append(c.hists[k], h)
	c.mu.Unlock()
	return h
}

// Describe implements prometheus.Collector.
func (c *waitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.admittedDesc
	ch <- c.waitDesc
}

// Collect implements prometheus.Collector.
func (c *waitCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, hs := range c.hists {
		var counts [12]uint64
		var sumNs int64
		for _, h := range hs {
			for i := range counts {
				counts[i] += h.buckets[i].Load()
			}
			sumNs += h.sumNs.Load()
		}
		cum := map[float64]uint64{}
		var total uint64
		for i, b := range waitBuckets {
			total += counts[i]
			cum[b] = total
		}
		total += counts[len(waitBuckets)]
		ts := k.tier.String()
		ch <- prometheus.MustNewConstMetric(c.admittedDesc, prometheus.CounterValue, float64(total), k.endpoint, ts)
		ch <- prometheus.MustNewConstHistogram(c.waitDesc, total, time.Duration(sumNs).Seconds(), cum, k.endpoint, ts)
	}
}

var _ prometheus.Collector = (*waitCollector)(nil)
