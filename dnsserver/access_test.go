package dnsserver

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/veerhq/veer/clock"
)

// node is an access node for tests: a real TCP listener that can be killed.
type node struct {
	ln net.Listener
}

func newNode(t *testing.T) *node {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(n.kill)
	return n
}

func (n *node) check() string { return "tcp://" + n.ln.Addr().String() }
func (n *node) kill()         { n.ln.Close() }

// askFrom asks for qtype of name with an EDNS Client Subnet of subnet (none
// when invalid) and returns the sorted addresses and the ECS scope.
func askFrom(t *testing.T, s *Server, name string, qtype uint16, subnet string) ([]string, int) {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.SetEdns0(1232, false)
	if p, err := netip.ParsePrefix(subnet); err == nil {
		fam := uint16(1)
		if p.Addr().Is6() {
			fam = 2
		}
		q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_SUBNET{
			Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(p.Bits()), Address: p.Addr().AsSlice(),
		})
	}
	r := exchange(t, "udp", s.Addr(), q)
	if r.Rcode != dns.RcodeSuccess {
		t.Fatalf("rcode %s", dns.RcodeToString[r.Rcode])
	}
	var got []string
	for _, rr := range r.Answer {
		switch v := rr.(type) {
		case *dns.A:
			got = append(got, v.A.String())
			if v.Hdr.Ttl != 20 && name == "api.example.test." {
				t.Errorf("TTL %d, want 20", v.Hdr.Ttl)
			}
		case *dns.AAAA:
			got = append(got, v.AAAA.String())
		}
	}
	slices.Sort(got)
	scope := -1
	for _, o := range r.IsEdns0().Option {
		if e, ok := o.(*dns.EDNS0_SUBNET); ok {
			scope = int(e.SourceScope)
		}
	}
	return got, scope
}

// TestAccessFailover kills nodes one by one: each leaves the answers within
// one health interval (one round on the virtual clock; the checks run over
// real sockets); a region with no healthy node gets the other regions'; all
// dead: all answered (fail open); a node that comes back returns.
func TestAccessFailover(t *testing.T) {
	east1, east2, west := newNode(t), newNode(t), newNode(t)
	var westHTTP atomic.Int32
	westHTTP.Store(http.StatusOK)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(int(westHTTP.Load()))
	}))
	defer web.Close()
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
health: {interval: 3s, timeout: 3s} # a real-time bound on each probe, as long as allowed: a busy machine took over 1 s (no step waits for it: dead nodes refuse at once)
regions:
  - {cidr: 10.1.0.0/16, region: east}
  - {cidr: 10.2.0.0/16, region: west}
  - {cidr: 127.0.0.0/8, region: west}
zones:
  - origin: example.test.
    records: ["www A 192.0.2.1"]
    access:
      - name: api
        ttl: 20
        nodes:
          - {addr: 192.0.2.11, region: east, check: "%s"}
          - {addr: 192.0.2.12, region: east, check: "%s"}
          - {addr: 192.0.2.21, region: west, check: "%s"}
          - {addr: 192.0.2.22, region: west, check: "%s/healthz"}
          - {addr: "2001:db8::21", region: west}
`, east1.check(), east2.check(), west.check(), web.URL)
	clk := clock.NewManual(time.Unix(0, 0))
	rounds := 0
	s := startServer(t, parseConfig(t, yaml), Options{Clock: clk, OnHealthRound: func(map[string]bool) { rounds++ }})
	interval := 3 * time.Second
	steps := []struct {
		do      func()
		advance time.Duration
		subnet  string
		want    []string
		scope   int
	}{
		{nil, 0, "10.1.2.0/24", []string{"192.0.2.11", "192.0.2.12"}, 24},
		{nil, 0, "10.2.0.0/16", []string{"192.0.2.21", "192.0.2.22"}, 16},
		{nil, 0, "", []string{"192.0.2.21", "192.0.2.22"}, -1},                                        // source 127.0.0.1: west
		{nil, 0, "10.9.0.0/16", []string{"192.0.2.11", "192.0.2.12", "192.0.2.21", "192.0.2.22"}, 16}, // no region: all
		{east1.kill, 0, "10.1.2.0/24", []string{"192.0.2.11", "192.0.2.12"}, 24},                      // not checked yet
		{nil, interval, "10.1.2.0/24", []string{"192.0.2.12"}, 24},
		{east2.kill, interval, "10.1.2.0/24", []string{"192.0.2.21", "192.0.2.22"}, 24}, // east empty: other regions
		{func() { westHTTP.Store(http.StatusServiceUnavailable) }, interval, "10.2.0.0/16", []string{"192.0.2.21"}, 16},
		{west.kill, interval, "10.9.0.0/16", []string{"192.0.2.11", "192.0.2.12", "192.0.2.21", "192.0.2.22"}, 16}, // fail open
		{nil, 0, "10.2.0.0/16", []string{"192.0.2.21", "192.0.2.22"}, 16},                                          // within the region
		{func() { westHTTP.Store(http.StatusOK) }, interval, "10.1.0.0/16", []string{"192.0.2.22"}, 16},            // back
	}
	clk.Advance(0) // the first round
	for i, st := range steps {
		if st.do != nil {
			st.do()
		}
		before := rounds
		clk.Advance(st.advance)
		if wantRounds := before + int(st.advance/interval); rounds != wantRounds {
			t.Fatalf("step %d: %d rounds, want %d", i, rounds, wantRounds)
		}
		got, scope := askFrom(t, s, "api.example.test.", dns.TypeA, st.subnet)
		if !slices.Equal(got, st.want) || scope != st.scope {
			t.Errorf("step %d (%s): %v scope %d, want %v scope %d", i, st.subnet, got, scope, st.want, st.scope)
		}
	}
	// AAAA comes from the IPv6 node only; a static name gets scope 0.
	if got, _ := askFrom(t, s, "api.example.test.", dns.TypeAAAA, ""); !slices.Equal(got, []string{"2001:db8::21"}) {
		t.Errorf("AAAA %v", got)
	}
	if _, scope := askFrom(t, s, "www.example.test.", dns.TypeA, "10.1.0.0/16"); scope != 0 {
		t.Errorf("static answer scope %d, want 0", scope)
	}
}

// TestWeightedShuffle checks the shares of a weighted pick of one.
func TestWeightedShuffle(t *testing.T) {
	a := &accessDomain{name: "api.test.", ttl: 30, answers: 1, nodes: []accessNode{
		{addr: netip.MustParseAddr("192.0.2.1"), weight: 1},
		{addr: netip.MustParseAddr("192.0.2.3"), weight: 3},
		{addr: netip.MustParseAddr("192.0.2.9"), weight: 100, region: "elsewhere"},
	}}
	const n = 8000
	heavy := 0
	for range n {
		rrs := a.answer("api.test.", dns.TypeA, "", nil)
		if len(rrs) != 1 {
			t.Fatalf("%d answers, want 1", len(rrs))
		}
		ip := rrs[0].(*dns.A).A.String()
		if ip == "192.0.2.9" {
			t.Fatal("picked a node of another region while the client's had some")
		}
		if ip == "192.0.2.3" {
			heavy++
		}
	}
	// Expected share 0.75, standard deviation 0.005: 0.72..0.78 is 6 sigma.
	if share := float64(heavy) / n; share < 0.72 || share > 0.78 {
		t.Errorf("weight-3 node share %.3f, want about 0.75", share)
	}
	a.answers = 0
	all := a.answer("api.test.", dns.TypeA, "", nil)
	if len(all) != 2 {
		t.Errorf("answers 0 gave %d records, want the region's 2", len(all))
	}
}
