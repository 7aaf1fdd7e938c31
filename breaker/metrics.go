package breaker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

type metrics struct {
	state                          prometheus.Gauge
	transitions                    [4]prometheus.Counter
	rejOpen, rejDegraded, rejProbe prometheus.Counter
	stale                          prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, name string) metrics {
	state := obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "veer_breaker_state",
		Help: "Circuit state: 0 closed, 1 degraded, 2 open, 3 half-open.",
	}, []string{"breaker"}))
	trans := obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "veer_breaker_transitions_total",
		Help: "State changes by target state.",
	}, []string{"breaker", "to"}))
	rej := obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "veer_breaker_rejected_total",
		Help: "Requests rejected by reason (open, degraded, probe_limit).",
	}, []string{"breaker", "reason"}))
	stale := obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "veer_breaker_stale_outcomes_total",
		Help: "Outcomes dropped because they belonged to an older generation.",
	}, []string{"breaker"}))
	m := metrics{
		state:       state.WithLabelValues(name),
		rejOpen:     rej.WithLabelValues(name, "open"),
		rejDegraded: rej.WithLabelValues(name, "degraded"),
		rejProbe:    rej.WithLabelValues(name, "probe_limit"),
		stale:       stale.WithLabelValues(name),
	}
	for s := range m.transitions {
		m.transitions[s] = trans.WithLabelValues(name, State(s).String())
	}
	return m
}
