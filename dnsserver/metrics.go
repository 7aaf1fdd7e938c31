package dnsserver

import (
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

// Transport is the way a query arrived, a label of the metrics.
type Transport uint8

// Transports.
const (
	UDP Transport = iota
	TCP
	DoT
	DoH
	numTransports
)

var transportNames = [numTransports]string{"udp", "tcp", "dot", "doh"}

func (t Transport) String() string {
	if t < numTransports {
		return transportNames[t]
	}
	return "unknown"
}

// The query types and rcodes that get their own label value; the rest are
// "other", which keeps the label sets bounded whatever clients send.
var (
	metricQtypes = []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeCNAME, dns.TypeTXT, dns.TypeSOA, dns.TypeNS,
		dns.TypeMX, dns.TypeSRV, dns.TypeCAA, dns.TypePTR, dns.TypeANY, dns.TypeHTTPS}
	metricRcodes = []int{dns.RcodeSuccess, dns.RcodeNameError, dns.RcodeRefused, dns.RcodeFormatError,
		dns.RcodeNotImplemented, dns.RcodeServerFailure, dns.RcodeBadVers}
)

const (
	numQtypes = 13 // len(metricQtypes) + other
	numRcodes = 8  // len(metricRcodes) + other
)

// Drop reasons, a label of veer_dnsserver_dropped_total.
const (
	dropMalformed = "malformed"
	dropResponse  = "response"
	dropRRL       = "rrl"
	dropTCPLimit  = "tcp_conn_limit"
)

type metrics struct {
	vec       *prometheus.CounterVec
	queries   [numTransports][numQtypes][numRcodes]atomic.Pointer[prometheus.Counter]
	latency   [numTransports]prometheus.Observer
	dropped   *prometheus.CounterVec
	slipped   prometheus.Counter
	truncated *prometheus.CounterVec
	reloads   *prometheus.CounterVec
	nodesUp   prometheus.Gauge
	nodesAll  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		vec: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_dnsserver_queries_total",
			Help: "Answered DNS queries by transport, query type and rcode.",
		}, []string{"transport", "qtype", "rcode"})),
		dropped: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_dnsserver_dropped_total",
			Help: "Queries dropped without an answer, by reason (malformed, response, rrl, tcp_conn_limit).",
		}, []string{"reason"})),
		slipped: obs.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "veer_dnsserver_rrl_slipped_total",
			Help: "Rate-limited queries answered empty with TC set (RRL slip).",
		})),
		truncated: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_dnsserver_truncated_total",
			Help: "Answers sent with TC set, by cause (size, amplification).",
		}, []string{"cause"})),
		reloads: obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "veer_dnsserver_reloads_total",
			Help: "Data and config applied (ok) or rejected (invalid).",
		}, []string{"result"})),
		nodesUp: obs.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "veer_dnsserver_nodes_healthy_count",
			Help: "Health-checked access nodes whose last check passed.",
		})),
		nodesAll: obs.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "veer_dnsserver_nodes_checked_count",
			Help: "Health-checked access nodes.",
		})),
	}
	lat := obs.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "veer_dnsserver_answer_seconds",
		Help:    "Time from a query's arrival to its answer being ready, by transport.",
		Buckets: []float64{5e-6, 10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 1e-3, 5e-3, 25e-3},
	}, []string{"transport"}))
	for t := range numTransports {
		m.latency[t] = lat.WithLabelValues(t.String())
	}
	for _, r := range []string{dropMalformed, dropResponse, dropRRL, dropTCPLimit} {
		m.dropped.WithLabelValues(r)
	}
	for _, c := range []string{"size", "amplification"} {
		m.truncated.WithLabelValues(c)
	}
	for _, r := range []string{"ok", "invalid"} {
		m.reloads.WithLabelValues(r)
	}
	return m
}

// query counts one answered query. The counter of each label combination is
// looked up once and then read lock-free.
func (m *metrics) query(t Transport, qtype uint16, rcode int) {
	qi, ri := numQtypes-1, numRcodes-1
	for i, q := range metricQtypes {
		if q == qtype {
			qi = i
			break
		}
	}
	for i, r := range metricRcodes {
		if r == rcode {
			ri = i
			break
		}
	}
	p := &m.queries[t][qi][ri]
	c := p.Load()
	if c == nil {
		qs, rs := "other", "other"
		if qi < len(metricQtypes) {
			qs = dns.TypeToString[metricQtypes[qi]]
		}
		if ri < len(metricRcodes) {
			rs = dns.RcodeToString[metricRcodes[ri]]
		}
		cc := m.vec.WithLabelValues(t.String(), qs, rs)
		p.Store(&cc)
		c = &cc
	}
	(*c).Inc()
}
