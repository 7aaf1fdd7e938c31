package control

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

// ruleKinds label veer_control_answers_total (bounded: never a rule,
// region or device name).
var ruleKinds = []string{"emergency", "whitelist", "bucket", "region", "default"}

type metrics struct {
	answers   [5]prometheus.Counter
	snapshots *prometheus.CounterVec
	resets    prometheus.Counter
	applied   prometheus.Gauge
	admin     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry() // unregistered: counted, not exported
	}
	m := &metrics{
		snapshots: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "veer_control_snapshots_total",
			Help: "Routing snapshots compiled from the store, by result (applied, invalid)."}, []string{"result"})),
		resets: obs.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "veer_control_store_resets_total",
			Help: "Store watches that ended (compacted, backend unreachable) and were re-listed."})),
		applied: obs.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "veer_control_snapshot_timestamp_seconds",
			Help: "When the current routing snapshot was applied."})),
		admin: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "veer_control_admin_requests_total",
			Help: "Admin API requests by status code."}, []string{"code"})),
	}
	answers := obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "veer_control_answers_total",
		Help: "Routing answers by the kind of rule that decided."}, []string{"rule"}))
	for i, k := range ruleKinds {
		m.answers[i] = answers.WithLabelValues(k)
	}
	return m
}

// count records an answer by its rule's kind.
func (m *metrics) count(rule string) {
	for i, k := range ruleKinds {
		if len(rule) >= len(k) && rule[:len(k)] == k {
			m.answers[i].Inc()
			return
		}
	}
	m.answers[4].Inc()
}
