package dnsserver

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/veerhq/veer/config"
)

// FuzzConfig feeds arbitrary config files (the zone parser included) to
// config.Parse: no panic, and whatever is accepted compiles and serves.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(testZone))
	f.Add([]byte(bigZone("")))
	f.Add([]byte("zones:\n  - origin: a.\n    records: ['@ SOA a. b. 1 2 3 4 5', 'x CNAME x', '* A 1.2.3.4']\n"))
	f.Add([]byte("zones:\n  - origin: a.\n    access:\n      - name: '@'\n        nodes: [{addr: '::1', weight: 3, check: 'http://[::1]:1/x'}]\nregions: [{cidr: ::/0, region: r}]\n"))
	f.Add([]byte("zones: [{origin: ., records: ['$ORIGIN b.', 'x TXT \"\\\\\"']}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		if err := config.Parse(data, "fuzz.yaml", &c); err != nil {
			return
		}
		snap, err := compileData(c.Data)
		if err != nil {
			t.Fatalf("Validate accepted what compileData rejects: %v", err)
		}
		for _, z := range snap.zones {
			m := new(dns.Msg)
			for name := range z.names {
				snap.lookup(query{name: name, qtype: dns.TypeA, client: netip.MustParseAddr("192.0.2.1")}, m)
			}
		}
	})
}

// FuzzAnswer feeds arbitrary packets to the query handler over every
// transport: no panic; an answer is a well-formed response to the query,
// within the size bounds.
func FuzzAnswer(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
		edns  bool
	}{{"www.example.test.", dns.TypeA, true}, {"alias.example.test.", dns.TypeAAAA, false}, {"nope.example.test.", dns.TypeTXT, true}, {"example.org.", dns.TypeANY, false}} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		if q.edns {
			m.SetEdns0(4096, true)
			m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: []byte{10, 1, 2, 0}})
		}
		wire, _ := m.Pack()
		for tr := range numTransports {
			f.Add(wire, uint8(tr))
		}
	}
	for _, name := range []string{"nope.example.test.", "a.b.c.other.org.", "x.ns1.example.test."} {
		for _, edns := range []bool{false, true} {
			m := new(dns.Msg) // plain queries: the template and fast REFUSED
			m.SetQuestion(name, dns.TypeA)
			if edns {
				m.SetEdns0(1232, false)
			}
			wire, _ := m.Pack()
			f.Add(wire, uint8(UDP))
		}
	}
	f.Add([]byte{0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0}, uint8(0))
	cfg := parseConfig(f, bigZone("amplification: 4\n")+`    access:
      - name: api
        nodes: [{addr: 192.0.2.1, region: a}, {addr: "2001:db8::1"}]
regions: [{cidr: 10.0.0.0/8, region: a}]
`)
	s, err := New(cfg, Options{Registerer: nilRegistry(), Logger: discard()})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	buf := make([]byte, maxMsg)
	f.Fuzz(func(t *testing.T, wire []byte, tr uint8) {
		transport := Transport(tr % uint8(numTransports))
		// The NXDOMAIN template and the fast REFUSED answer are the full
		// path's answer, byte for byte.
		if pq, plain := parsePlain(wire, nil); plain {
			st := s.state.Load()
			if fast, ok := s.fastNegative(st, pq, wire, transport, make([]byte, maxMsg), time.Now()); ok {
				full, ok := s.answerFull(st, wire, netip.MustParseAddr("127.0.0.1"), transport, make([]byte, maxMsg), time.Now(), pq, false)
				if !ok || !bytes.Equal(fast, full) {
					t.Fatalf("fast negative answer differs from the full path's\n% x\n% x", fast, full)
				}
			}
		}
		out, ok := s.Answer(wire, netip.MustParseAddr("127.0.0.1"), transport, buf)
		if !ok {
			return
		}
		var m dns.Msg
		if err := m.Unpack(out); err != nil {
			t.Fatalf("answer does not unpack: %v", err)
		}
		if !m.Response || len(wire) < 2 || m.Id != binary.BigEndian.Uint16(wire) {
			t.Fatalf("not a response to the query: qr %v id %d", m.Response, m.Id)
		}
		if len(out) > DefaultMaxAnswerBytes {
			t.Fatalf("%d bytes, over the cap", len(out))
		}
		if transport == UDP && len(out) > 4*len(wire) && !m.Truncated {
			t.Fatalf("UDP answer of %d bytes to %d without TC", len(out), len(wire))
		}
	})
}
