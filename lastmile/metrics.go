package lastmile

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

// metrics are the package's Prometheus series. Labels are bounded: steps,
// outcome kinds and protocols.
type metrics struct {
	served   *prometheus.CounterVec // route step that carried a request
	failures *prometheus.CounterVec // failed steps by step and kind
	answers  *prometheus.CounterVec // resolver step that answered
	conns    *prometheus.CounterVec // protocol that won a race
	chain    prometheus.Histogram   // route discovery time
	broken   *prometheus.CounterVec // protocols marked broken
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		served: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_lastmile_served_total",
			Help: "Requests carried, by the route step that served them (route = an earlier working route reused).",
		}, []string{"step"})),
		failures: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_lastmile_step_failures_total",
			Help: "Failed steps of the last-mile chain, by step and outcome kind.",
		}, []string{"step", "kind"})),
		answers: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_lastmile_dns_answers_total",
			Help: "Name resolutions answered, by resolver step (cache and stale included).",
		}, []string{"step"})),
		conns: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_lastmile_race_wins_total",
			Help: "Protocol races won, by protocol (h3, h2, http/1.1).",
		}, []string{"protocol"})),
		broken: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_lastmile_protocol_broken_total",
			Help: "Times a protocol was marked broken on a node, by protocol step.",
		}, []string{"step"})),
		chain: obs.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "veer_lastmile_chain_duration_seconds",
			Help:    "Time to discover a route (chain runs only).",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10},
		})),
	}
}

func (m *metrics) fail(s string, k outcome.Kind) {
	m.failures.WithLabelValues(string(s), k.String()).Inc()
}
