package dnsserver

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"

	"github.com/miekg/dns"
)

// accessDomain is a compiled Access.
type accessDomain struct {
	name    string
	ttl     uint32
	answers int
	nodes   []accessNode
}

type accessNode struct {
	addr   netip.Addr
	region string
	weight float64
	check  string
}

// healthFunc reports whether the node checked by check is up. A node
// without a check is always up.
type healthFunc func(check string) bool

// answer picks the A (or AAAA) records for a client of region:
//  1. the nodes of the question's address family that are healthy; when
//     none is, all of them (fail open: a wrong "down" verdict must not take
//     the domain off the air);
//  2. of those, the ones in the client's region; when none is, all of them;
//  3. a weighted shuffle of that set (Efraimidis-Spirakis: key = Exp(1) /
//     weight, ascending), cut to the configured number of answers.
func (a *accessDomain) answer(owner string, qtype uint16, region string, up healthFunc) []dns.RR {
	want4 := qtype == dns.TypeA
	type cand struct {
		n   *accessNode
		key float64
	}
	var buf [16]cand
	all := buf[:0]
	healthy := 0
	for i := range a.nodes {
		n := &a.nodes[i]
		if n.addr.Is4() != want4 {
			continue
		}
		all = append(all, cand{n: n})
		if up == nil || up(n.check) {
			healthy++
		}
	}
	if len(all) == 0 {
		return nil
	}
	pool := all
	if healthy > 0 && healthy < len(all) {
		pool = slices.DeleteFunc(pool, func(c cand) bool { return up != nil && !up(c.n.check) })
	}
	inRegion := 0
	for _, c := range pool {
		if c.n.region == region {
			inRegion++
		}
	}
	if inRegion > 0 && inRegion < len(pool) {
		pool = slices.DeleteFunc(pool, func(c cand) bool { return c.n.region != region })
	}
	for i := range pool {
		pool[i].key = rand.ExpFloat64() / pool[i].n.weight
	}
	slices.SortFunc(pool, func(x, y cand) int {
		switch {
		case x.key < y.key:
			return -1
		case x.key > y.key:
			return 1
		}
		return 0
	})
	if a.answers > 0 && len(pool) > a.answers {
		pool = pool[:a.answers]
	}
	out := make([]dns.RR, len(pool))
	for i, c := range pool {
		h := dns.RR_Header{Name: owner, Rrtype: qtype, Class: dns.ClassINET, Ttl: a.ttl}
		ip := net.IP(c.n.addr.AsSlice())
		if want4 {
			out[i] = &dns.A{Hdr: h, A: ip}
		} else {
			out[i] = &dns.AAAA{Hdr: h, AAAA: ip}
		}
	}
	return out
}
