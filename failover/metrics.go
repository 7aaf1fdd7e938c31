package failover

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

// metrics of a Transport. Domains are labelled by role ("primary",
// "backup_1", ...), never by host name, so series stay bounded.
//
// Several Transports registered with one Registerer share the series:
// counters add up, and veer_failover_state shows the state of the one that
// changed last. Give each its own Registerer (prometheus.WrapRegistererWith)
// to tell them apart.
type metrics struct {
	state       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	requests    []prometheus.Counter // by domain index
	canaryOK    []prometheus.Counter
	canaryFail  []prometheus.Counter
	// misconfigured counts canaries answered 401, 403 or 404.
	misconfigured []prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, domains int) *metrics {
	state := obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "veer_failover_state",
		Help: "1 for the failover state the transport is in, 0 for the others.",
	}, []string{"state"}))
	transitions := obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "veer_failover_transitions_total",
		Help: "Failover state transitions, by from, to and reason.",
	}, []string{"from", "to", "reason"}))
	requests := obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "veer_failover_requests_total",
		Help: "Regular requests sent, by domain role.",
	}, []string{"domain"}))
	canaries := obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "veer_failover_canaries_total",
		Help: "Canary requests, by domain role and result.",
	}, []string{"domain", "result"}))
	misconfigured := obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "veer_failover_canary_misconfigured_total",
		Help: "Canaries answered 401, 403 or 404, by domain role: the canary path is not a health endpoint of that domain, so its canaries can never succeed.",
	}, []string{"domain"}))
	m := &metrics{state: state, transitions: transitions}
	for d := range domains {
		role := roleOf(d)
		m.requests = append(m.requests, requests.WithLabelValues(role))
		m.canaryOK = append(m.canaryOK, canaries.WithLabelValues(role, "success"))
		m.canaryFail = append(m.canaryFail, canaries.WithLabelValues(role, "failure"))
		m.misconfigured = append(m.misconfigured, misconfigured.WithLabelValues(role))
	}
	return m
}

func roleOf(d int) string {
	if d == PrimaryIndex {
		return "primary"
	}
	return "backup_" + strconv.Itoa(d)
}

func (m *metrics) setState(s State) {
	for _, x := range []State{Primary, Failover, Backup, Recovery} {
		v := 0.0
		if x == s {
			v = 1
		}
		m.state.WithLabelValues(x.String()).Set(v)
	}
}

func (m *metrics) transition(t Transition) {
	m.transitions.WithLabelValues(t.From.String(), t.To.String(), t.Reason.String()).Inc()
	m.setState(t.To)
}

func (m *metrics) canary(d int, ok bool) {
	if ok {
		m.canaryOK[d].Inc()
	} else {
		m.canaryFail[d].Inc()
	}
}
