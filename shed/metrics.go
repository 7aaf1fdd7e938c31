package shed

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/tier"
)

// metrics are labelled by endpoint (bounded by MaxEndpoints), tier (4) and
// reason (4); never by caller.
type metrics struct {
	admitted   *prometheus.CounterVec
	shed       *prometheus.CounterVec
	wait       *prometheus.HistogramVec
	overloaded *prometheus.GaugeVec
	limit      *prometheus.GaugeVec
	inflight   *prometheus.GaugeVec
	queue      *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	ep := []string{"endpoint"}
	ept := []string{"endpoint", "tier"}
	return &metrics{
		admitted: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_shed_admitted_total",
			Help: "Requests admitted to their handler, by endpoint and tier.",
		}, ept)),
		shed: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_shed_shed_total",
			Help: "Requests shed, by endpoint, tier and reason (overload, tier, queue_full, deadline).",
		}, []string{"endpoint", "tier", "reason"})),
		wait: obs.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "veer_shed_queue_wait_seconds",
			Help:    "Wait from arrival to handler start of admitted requests, by endpoint and tier.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1},
		}, ept)),
		overloaded: obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "veer_shed_overloaded_state",
			Help: "1 while the endpoint's CoDel detector reports overload, else 0.",
		}, ep)),
		limit: obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "veer_shed_concurrency_limit",
			Help: "Current concurrency limit of the endpoint.",
		}, ep)),
		inflight: obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "veer_shed_requests_inflight",
			Help: "Requests running in the endpoint's handler (sampled each interval).",
		}, ep)),
		queue: obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "veer_shed_queue_entries",
			Help: "Requests waiting in the endpoint's queue (sampled each interval).",
		}, ep)),
	}
}

// stageMetrics are the series of one endpoint, resolved once so the request
// path does no label lookups.
type stageMetrics struct {
	admitted   [tier.CriticalPlus + 1]prometheus.Counter
	shed       [tier.CriticalPlus + 1][numReasons]prometheus.Counter
	wait       [tier.CriticalPlus + 1]prometheus.Observer
	overloaded prometheus.Gauge
	limit      prometheus.Gauge
	inflight   prometheus.Gauge
	queue      prometheus.Gauge
}

func (m *metrics) forEndpoint(name string) *stageMetrics {
	sm := &stageMetrics{
		overloaded: m.overloaded.WithLabelValues(name),
		limit:      m.limit.WithLabelValues(name),
		inflight:   m.inflight.WithLabelValues(name),
		queue:      m.queue.WithLabelValues(name),
	}
	for _, t := range tier.All {
		ts := t.String()
		sm.admitted[t] = m.admitted.WithLabelValues(name, ts)
		sm.wait[t] = m.wait.WithLabelValues(name, ts)
		for r := Reason(0); r < numReasons; r++ {
			sm.shed[t][r] = m.shed.WithLabelValues(name, ts, r.String())
		}
	}
	return sm
}
