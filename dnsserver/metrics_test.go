package dnsserver

import (
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

// TestMetricsLint: every metric follows the naming rules, and queries are
// counted by transport, type and rcode.
func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := startServer(t, parseConfig(t, testZone), Options{Registerer: reg})
	ask(t, "udp", s.Addr(), "www.example.test.", dns.TypeA, 0)
	ask(t, "tcp", s.Addr(), "nope.example.test.", dns.TypeAAAA, 0)
	ask(t, "udp", s.Addr(), "x.example.test.", 65000, 0) // an unknown type: "other"
	for _, err := range obs.Lint(reg) {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "veer_dnsserver_queries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + " "
			}
			got[key] = m.GetCounter().GetValue()
		}
	}
	for _, want := range []string{"qtype=A rcode=NOERROR transport=udp ", "qtype=AAAA rcode=NXDOMAIN transport=tcp ", "qtype=other rcode=NXDOMAIN transport=udp "} {
		if got[want] != 1 {
			t.Errorf("queries_total{%s} = %v, want 1 (all: %v)", want, got[want], got)
		}
	}
}
