package lastmile

import (
	"net"
	"testing"

	"github.com/miekg/dns"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/routing/schedule"
)

func packed(t testing.TB, m *dns.Msg) []byte {
	b, err := m.Pack()
	must(t, err)
	return b
}

func answerSeeds(t testing.TB) [][]byte {
	q := new(dns.Msg)
	q.SetQuestion("api.test.", dns.TypeA)
	a := q.Copy()
	a.Response = true
	a.Answer = []dns.RR{
		&dns.CNAME{Hdr: dns.RR_Header{Name: "api.test.", Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 30}, Target: "edge.cdn.test."},
		&dns.A{Hdr: dns.RR_Header{Name: "edge.cdn.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 7)},
		&dns.AAAA{Hdr: dns.RR_Header{Name: "edge.cdn.test.", Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 90}, AAAA: net.ParseIP("2001:db8::7")},
	}
	sf := q.Copy()
	sf.Rcode = dns.RcodeServerFailure
	tc := a.Copy()
	tc.Truncated = true
	loop := q.Copy()
	loop.Answer = []dns.RR{
		&dns.CNAME{Hdr: dns.RR_Header{Name: "api.test.", Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 30}, Target: "api.test."},
	}
	return [][]byte{packed(t, q), packed(t, a), packed(t, sf), packed(t, tc), packed(t, loop)}
}

func TestParseAnswerCNAMEChain(t *testing.T) {
	m := new(dns.Msg)
	must(t, m.Unpack(answerSeeds(t)[1]))
	got, ttl, err := parseAnswer("API.test.", m)
	must(t, err)
	if len(got) != 2 || got[0].String() != "192.0.2.7" || got[1].String() != "2001:db8::7" || ttl != 30 {
		t.Fatalf("got %v ttl %d", got, ttl)
	}
	if _, _, err := parseAnswer("other.test.", m); outcome.ClassifyError(err) != outcome.DNSServerFailure {
		t.Fatalf("mismatched question: %v", err)
	}
}

// FuzzParseAnswer feeds arbitrary DNS messages to the answer handling: it
// must never panic, and must either return usable addresses or an error that
// classifies as a DNS failure.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range answerSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := new(dns.Msg)
		if err := m.Unpack(data); err != nil {
			return
		}
		addrs, _, err := parseAnswer("api.test.", m)
		if err != nil {
			if k := outcome.ClassifyError(err); !k.DNS() {
				t.Fatalf("error %v classifies as %v, want a DNS kind", err, k)
			}
			if len(addrs) != 0 {
				t.Fatalf("addresses %v with error %v", addrs, err)
			}
			return
		}
		if len(addrs) == 0 {
			t.Fatal("no addresses and no error")
		}
		for _, a := range addrs {
			if !schedule.UsableAddr(a.Unmap()) {
				t.Fatalf("unusable address %v", a)
			}
		}
	})
}

// FuzzParseCacheFile: a cache file that parses survives a save/parse round
// trip unchanged in size (answers and protocol memory); nothing panics.
func FuzzParseCacheFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"entries":[{"name":"api.test.","addrs":["127.0.0.1","::1"],"expires":"2026-01-01T00:05:00Z","stored":"2026-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"version":2,"entries":[],"protocols":[{"network":"wifi:1","addr":"127.0.0.1:443","protocol":"h3","failures":2,"until":"2026-01-01T00:05:00Z"}],"alt_svc":[{"addr":"[::1]:443","until":"2026-01-01T00:05:00Z"}]}`))
	f.Add([]byte(`{"version":3}`))
	f.Add([]byte(`{"version":1,"entries":[{"name":"API.test","addrs":[]}]}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseCacheFile(data)
		if err != nil {
			return
		}
		c := &dnsCache{m: p.entries, maxEntries: len(p.entries) + 1}
		snap := c.snapshotLocked()
		snap.Protocols, snap.AltSvc = p.extras.protocols, p.extras.altSvc
		b, err := jsonMarshal(snap)
		must(t, err)
		p2, err := parseCacheFile(b)
		if err != nil || len(p2.entries) != len(p.entries) || len(p2.extras.protocols) != len(p.extras.protocols) || len(p2.extras.altSvc) != len(p.extras.altSvc) {
			t.Fatalf("round trip: %d/%d/%d entries -> %d/%d/%d, %v", len(p.entries), len(p.extras.protocols), len(p.extras.altSvc),
				len(p2.entries), len(p2.extras.protocols), len(p2.extras.altSvc), err)
		}
	})
}
