package dnsserver

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testZone is the zone most tests serve.
const testZone = `
listen: 127.0.0.1:0
udp_workers: 2
zones:
  - origin: example.test.
    ttl: 300
    soa: ns1.example.test. hostmaster.example.test. 7 3600 600 86400 60
    ns: [ns1.example.test., ns2.example.test.]
    records:
      - "@ 120 A 192.0.2.1"
      - "www 60 A 192.0.2.10"
      - "www 60 A 192.0.2.11"
      - "www 60 AAAA 2001:db8::10"
      - "alias CNAME www"
      - "chain CNAME alias"
      - "dangling CNAME nothing"
      - "out CNAME www.elsewhere.test."
      - "txt 30 TXT \"hello world\""
      - "a.b.deep A 192.0.2.20"
      - "ns1 A 192.0.2.53"
      - "mail MX 10 mx.example.test."
`

// parseConfig parses y as a config file would be.
func parseConfig(t testing.TB, y string) Config {
	t.Helper()
	var c Config
	if err := config.Parse([]byte(y), "test.yaml", &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// startServer starts a server for cfg on loopback and stops it at cleanup.
func startServer(t testing.TB, cfg Config, opts Options) *Server {
	t.Helper()
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.Logger == nil {
		opts.Logger = obs.Discard
	}
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// ask sends one question over network ("udp", "tcp") and returns the answer.
func ask(t testing.TB, network string, addr netip.AddrPort, name string, qtype uint16, edns int) *dns.Msg {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.RecursionDesired = false
	if edns > 0 {
		q.SetEdns0(uint16(edns), false)
	}
	return exchange(t, network, addr, q)
}

func exchange(t testing.TB, network string, addr netip.AddrPort, q *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(q, addr.String())
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, q.Question[0].Name, dns.TypeToString[q.Question[0].Qtype], err)
	}
	return r
}

// rrStrings renders records as "name ttl type data", sorted as given.
func rrStrings(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		out = append(out, rr.String())
	}
	return out
}

func nilRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

func discard() *slog.Logger { return obs.Discard }

// testutilCount sums the answered queries of one transport.
func testutilCount(s *Server, tr Transport) float64 {
	var sum float64
	for q := range numQtypes {
		for r := range numRcodes {
			if c := s.m.queries[tr][q][r].Load(); c != nil {
				sum += testutil.ToFloat64(*c)
			}
		}
	}
	return sum
}
