package dnsserver

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// BenchmarkAnswer is the query path without sockets for a static name:
// after the first query, an answer from the cache.
func BenchmarkAnswer(b *testing.B) { benchAnswer(b, "www.example.test.") }

// BenchmarkAnswerFull is the full path: a name outside the zones is never
// cached (REFUSED has no records), so every query is unpacked, looked up
// and packed.
func BenchmarkAnswerFull(b *testing.B) { benchAnswer(b, "www.example.org.") }

// benchAnswer answers one A query for name over and over.
func benchAnswer(b *testing.B, name string) {
	s, err := New(parseConfig(b, testZone), Options{Registerer: nilRegistry(), Logger: discard()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
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
