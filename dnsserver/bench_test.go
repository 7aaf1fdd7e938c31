package dnsserver

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkAnswer is the query path without sockets for a static name:
// after the first query, an answer from the cache.
func BenchmarkAnswer(b *testing.B) { benchAnswer(b, "www.example.test.", false) }

// BenchmarkAnswerNXDOMAIN is a name that does not exist: the zone's
// packed NXDOMAIN template.
func BenchmarkAnswerNXDOMAIN(b *testing.B) { benchAnswer(b, "nope.example.test.", false) }

// BenchmarkAnswerRefused is a name outside the zones: REFUSED without
// unpacking.
func BenchmarkAnswerRefused(b *testing.B) { benchAnswer(b, "www.example.org.", false) }

// BenchmarkAnswerFull is the full path (unpack, look up, pack) for the
// NXDOMAIN query above, as every query not answered from the cache or a
// template takes it.
func BenchmarkAnswerFull(b *testing.B) { benchAnswer(b, "nope.example.test.", true) }

// benchAnswer answers one A query for name over and over.
func benchAnswer(b *testing.B, name string, full bool) {
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
	st := s.state.Load()
	pq, _ := parsePlain(wire, nil)
	b.ReportAllocs()
	for b.Loop() {
		var ok bool
		if full {
			_, ok = s.answerFull(st, wire, src, UDP, buf, time.Now(), pq, false)
		} else {
			_, ok = s.Answer(wire, src, UDP, buf)
		}
		if !ok {
			b.Fatal("no answer")
		}
	}
}
