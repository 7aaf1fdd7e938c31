package dnsserver

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// BenchmarkAnswer is the query path without sockets: unpack, look up,
// pack, count.
func BenchmarkAnswer(b *testing.B) {
	s, err := New(parseConfig(b, testZone), Options{Registerer: nilRegistry(), Logger: discard()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	q := new(dns.Msg)
	q.SetQuestion("www.example.test.", dns.TypeA)
	q.SetEdns0(1232, false)
	wire, _ := q.Pack()
	buf := make([]byte, maxMsg)
	src := netip.MustParseAddr("127.0.0.1")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := s.Answer(wire, src, UDP, buf); !ok {
			b.Fatal("no answer")
		}
	}
}
