package dnsserver

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestNegativeSameAsFullPath: the NXDOMAIN answers built from a zone's
// template and the fast REFUSED answers are, byte for byte, what the full
// path (unpack, look up, pack) gives: for names of many lengths and letter
// cases, with and without EDNS0, RD and CD, over UDP and TCP, in a zone
// whose SOA names are inside it and one whose are not (and the root zone
// is not served, so other names are REFUSED). Names under the SOA's own
// names (which the full path compresses differently) and existing names
// take the full path; a query too large for its bounds as well.
func TestNegativeSameAsFullPath(t *testing.T) {
	cfg := parseConfig(t, testZone+`  - origin: other.test.
    soa: ns.elsewhere.test. admin.elsewhere.test. 1 3600 600 86400 30
    records: ["www A 192.0.2.99"]
`)
	s, err := New(cfg, Options{Registerer: nilRegistry(), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := s.state.Load()
	src := netip.MustParseAddr("127.0.0.1")
	names := []struct {
		name  string
		fast  bool
		rcode int
	}{
		{"nope.example.test.", true, dns.RcodeNameError},
		{"NoPe.ExAmPlE.TeSt.", true, dns.RcodeNameError},
		{"a.very-long_name.with.many.labels.below.example.test.", true, dns.RcodeNameError},
		{"x.www.example.test.", true, dns.RcodeNameError},
		{"nothing.OTHER.test.", true, dns.RcodeNameError},
		{"www.example.org.", true, dns.RcodeRefused},
		{"WWW.Example.ORG.", true, dns.RcodeRefused},
		{"test.", true, dns.RcodeRefused},
		{".", true, dns.RcodeRefused},
		{"x.hostmaster.example.test.", false, dns.RcodeNameError}, // under the SOA's RNAME
		{"hostmaster.example.test.", false, dns.RcodeNameError},
		{"x.ns1.example.test.", false, dns.RcodeNameError},   // under the MNAME
		{"www.example.test.", false, dns.RcodeSuccess},       // exists (then cached)
		{"b.deep.example.test.", false, dns.RcodeSuccess},    // exists, NODATA
		{"a.b\\.c.example.test.", false, dns.RcodeNameError}, // a dot inside a label
	}
	for _, c := range names {
		for _, edns := range []int{0, 1232} {
			for _, flags := range [][2]bool{{false, false}, {true, true}} {
				for _, tr := range []Transport{UDP, TCP} {
					q := new(dns.Msg)
					q.SetQuestion(c.name, dns.TypeA)
					q.Id, q.RecursionDesired, q.CheckingDisabled = 777, flags[0], flags[1]
					if edns > 0 {
						q.SetEdns0(uint16(edns), false)
					}
					wire, err := q.Pack()
					if err != nil {
						t.Fatal(err)
					}
					pq, plain := parsePlain(wire, nil)
					var fast []byte
					fastOK := false
					if plain {
						fast, fastOK = s.fastNegative(st, pq, wire, tr, make([]byte, maxMsg), startTime())
					}
					full, ok := s.answerFull(st, wire, src, tr, make([]byte, maxMsg), startTime(), pq, false)
					label := c.name + " edns " + strings.Repeat("+", edns/1232) + " " + tr.String()
					if !ok {
						t.Fatalf("%s: full path gave no answer", label)
					}
					if fastOK != c.fast {
						t.Errorf("%s: fast path %v, want %v", label, fastOK, c.fast)
					}
					var m dns.Msg
					if err := m.Unpack(full); err != nil || m.Rcode != c.rcode {
						t.Errorf("%s: full path rcode %d (%v), want %d", label, m.Rcode, err, c.rcode)
					}
					if fastOK && !bytes.Equal(fast, full) {
						t.Errorf("%s: fast answer differs from the full path's\n% x\n% x", label, fast, full)
					}
				}
			}
		}
	}
	// A root zone: every name is in it.
	root, err := New(parseConfig(t, "zones: [{origin: ., records: ['www.org. A 192.0.2.1']}]\n"), Options{Registerer: nilRegistry(), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, name := range []string{"nope.", "a.b.C.d.", "X.www.org."} {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		q.SetEdns0(1232, false)
		wire, _ := q.Pack()
		pq, _ := parsePlain(wire, nil)
		rst := root.state.Load()
		fast, ok := root.fastNegative(rst, pq, wire, UDP, make([]byte, maxMsg), startTime())
		full, _ := root.answerFull(rst, wire, src, UDP, make([]byte, maxMsg), startTime(), pq, false)
		if !ok || !bytes.Equal(fast, full) {
			t.Errorf("root zone, %s: fast %v\n% x\n% x", name, ok, fast, full)
		}
	}
	// Bounds: a 512-byte client, with a template that does not fit, takes
	// the full path (which truncates); here the amplification bound.
	s2, err := New(parseConfig(t, testZone+"amplification: 1\n"), Options{Registerer: nilRegistry(), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	q := new(dns.Msg)
	q.SetQuestion("nope.example.test.", dns.TypeA)
	wire, _ := q.Pack()
	pq, _ := parsePlain(wire, nil)
	if _, ok := s2.fastNegative(s2.state.Load(), pq, wire, UDP, make([]byte, maxMsg), startTime()); ok {
		t.Error("an NXDOMAIN larger than the amplification bound came from the template")
	}
}

func startTime() time.Time { return time.Now() }
