package limit

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/tier"
)

type metrics struct {
	keys     *prometheus.GaugeVec
	overflow *prometheus.CounterVec
	evicted  *prometheus.CounterVec
	rejected *prometheus.CounterVec
	body     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		keys: obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "veer_limit_keys",
			Help: "Keys kept per dimension.",
		}, []string{"dimension"})),
		overflow: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_limit_key_overflow_total",
			Help: "Requests whose key did not fit under max_keys and shared the dimension's overflow entry.",
		}, []string{"dimension"})),
		evicted: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_limit_evicted_keys_total",
			Help: "Idle keys evicted.",
		}, []string{"dimension"})),
		rejected: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_limit_rejected_total",
			Help: "Requests rejected by dimension, reason (rate, concurrency) and the request's tier (tier.FromContext; unset when it has none).",
		}, []string{"dimension", "reason", "tier"})),
		body: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_limit_body_rejected_total",
			Help: "Requests (413) and responses rejected for their body size, by direction.",
		}, []string{"direction"})),
	}
}

func (m *metrics) newTable(name string) *table {
	t := &table{
		name:    name,
		keys:    m.keys.WithLabelValues(name),
		over:    m.overflow.WithLabelValues(name),
		evicted: m.evicted.WithLabelValues(name),
	}
	// one series per tier, unset included: a bounded label (five values),
	// resolved once so that a rejection only adds
	for i := range t.rejRate {
		tn := tier.Tier(i).String()
		t.rejRate[i] = m.rejected.WithLabelValues(name, "rate", tn)
		t.rejConc[i] = m.rejected.WithLabelValues(name, "concurrency", tn)
	}
	return t
}

// tierIndex is t's slot in a table's rejection counters (Unset for a value
// that is not a tier).
func tierIndex(t tier.Tier) int {
	if !t.Valid() {
		return int(tier.Unset)
	}
	return int(t)
}
