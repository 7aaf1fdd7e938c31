package dnsserver

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestCacheSameAnswer: an answer from the cache is, byte for byte, the
// answer the full path gives to the same query (other ID, letter case, RD,
// CD, EDNS): both compress names into the question as asked, so they take
// its case. Access domains and answers without records are never cached.
func TestCacheSameAnswer(t *testing.T) {
	cfg := parseConfig(t, testZone+`    access:
      - name: api
        nodes: [{addr: 192.0.2.1}, {addr: 192.0.2.2}, {addr: 192.0.2.3}]
`)
	warm, err := New(cfg, Options{Registerer: nilRegistry(), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer warm.Close()
	src := netip.MustParseAddr("127.0.0.1")
	mk := func(name string, qtype uint16, id uint16, rd, cd bool, edns int) []byte {
		q := new(dns.Msg)
		q.SetQuestion(name, qtype)
		q.Id, q.RecursionDesired, q.CheckingDisabled = id, rd, cd
		if edns > 0 {
			q.SetEdns0(uint16(edns), false)
		}
		w, _ := q.Pack()
		return w
	}
	for _, c := range []struct {
		name   string
		qtype  uint16
		cached bool
	}{
		{"www.example.test.", dns.TypeA, true},
		{"alias.example.test.", dns.TypeAAAA, true},
		{"example.test.", dns.TypeSOA, true},
		{"txt.example.test.", dns.TypeTXT, true},
		{"nope.example.test.", dns.TypeA, false},
		{"www.example.test.", dns.TypeMX, true},   // NODATA
		{"b.deep.example.test.", dns.TypeA, true}, // NODATA, empty non-terminal
		{"api.example.test.", dns.TypeA, false},   // access domain
		{"www.example.org.", dns.TypeA, false},    // REFUSED
	} {
		for _, edns := range []int{0, 1232} {
			for _, tr := range []Transport{UDP, TCP} {
				warm.Answer(mk(c.name, c.qtype, 1, true, false, edns), src, tr, make([]byte, maxMsg))
				q2 := mk(flipCase(c.name), c.qtype, 4242, false, true, edns)
				got, ok := warm.Answer(q2, src, tr, make([]byte, maxMsg))
				cold, err := New(cfg, Options{Registerer: nilRegistry(), Logger: discard()})
				if err != nil {
					t.Fatal(err)
				}
				want, _ := cold.Answer(q2, src, tr, make([]byte, maxMsg))
				cold.Close()
				if !ok || (c.name != "api.example.test." && !bytes.Equal(got, want)) {
					t.Errorf("%s %s edns %d %s: cached answer differs from the full path's\n%s\n%s", c.name, dns.TypeToString[c.qtype], edns, tr, norm(t, got), norm(t, want))
				}
			}
		}
		warm.state.Load().cache.mu.RLock()
		_, in := warm.state.Load().cache.m[string(append(append([]byte(c.name), byte(c.qtype>>8), byte(c.qtype)), 0))]
		warm.state.Load().cache.mu.RUnlock()
		if in != c.cached {
			t.Errorf("%s %s: cached %v, want %v", c.name, dns.TypeToString[c.qtype], in, c.cached)
		}
	}
	// A reload empties the cache.
	if err := warm.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if n := len(warm.state.Load().cache.m); n != 0 {
		t.Errorf("%d cached answers after a reload, want 0", n)
	}
}

func flipCase(s string) string {
	b := []byte(s)
	for i, c := range b {
		if i%2 == 0 && 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// norm renders an answer in lower case: names compressed into the question
// take its letter case, which DNS names ignore.
func norm(t *testing.T, wire []byte) string {
	t.Helper()
	var m dns.Msg
	if err := m.Unpack(wire); err != nil {
		t.Fatal(err)
	}
	return strings.ToLower(m.String())
}
