package dnsserver

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// snapshot is the compiled Data the query path reads through an atomic
// pointer. It is never modified after compileData returns.
type snapshot struct {
	zones   map[string]*zone
	regions []regionRow // longest prefix first
}

type regionRow struct {
	prefix netip.Prefix
	region string
}

// maxCNAMEHops bounds a CNAME chain followed inside our zones.
const maxCNAMEHops = 8

func (s *snapshot) sortRegions() {
	slices.SortStableFunc(s.regions, func(a, b regionRow) int { return b.prefix.Bits() - a.prefix.Bits() })
}

// regionOf returns the region of the longest prefix containing a, or "".
func (s *snapshot) regionOf(a netip.Addr) string {
	a = a.Unmap()
	for _, r := range s.regions {
		if r.prefix.Contains(a) {
			return r.region
		}
	}
	return ""
}

// findZone returns the zone of the longest origin that name is in, or nil.
func (s *snapshot) findZone(name string) *zone {
	for n := name; n != ""; n = parent(n) {
		if z := s.zones[n]; z != nil {
			return z
		}
	}
	return s.zones["."]
}

// query is what lookup needs to know about one question.
type query struct {
	name   string // lower case, absolute
	qtype  uint16
	client netip.Addr // ECS address, else the source address
	health healthFunc
}

// result says how lookup answered.
type result struct {
	rcode  int
	auth   bool
	scoped bool // the answer depends on the client's address (access domain)
}

// lookup appends the answer for q to m's sections and reports the rcode.
func (s *snapshot) lookup(q query, m *dns.Msg) result {
	z := s.findZone(q.name)
	if z == nil {
		return result{rcode: dns.RcodeRefused}
	}
	res := result{auth: true}
	name := q.name
	for hops := 0; ; hops++ {
		o := z.names[name]
		if o == nil {
			res.rcode = dns.RcodeNameError
			m.Ns = append(m.Ns, z.negSOA())
			return res
		}
		if cn := o.sets[dns.TypeCNAME]; len(cn) > 0 && q.qtype != dns.TypeCNAME && q.qtype != dns.TypeANY {
			m.Answer = append(m.Answer, cn[0])
			target := strings.ToLower(cn[0].(*dns.CNAME).Target)
			nz := s.findZone(target)
			if nz == nil || hops+1 >= maxCNAMEHops {
				return res
			}
			z, name = nz, target
			continue
		}
		switch {
		case q.qtype == dns.TypeANY:
			// RFC 8482: a minimal answer instead of every record.
			m.Answer = append(m.Answer, &dns.HINFO{
				Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeHINFO, Class: dns.ClassINET, Ttl: z.negTTL()},
				Cpu: "RFC8482",
			})
			return res
		case o.access != nil && (q.qtype == dns.TypeA || q.qtype == dns.TypeAAAA):
			res.scoped = true
			region := s.regionOf(q.client)
			if rrs := o.access.answer(name, q.qtype, region, q.health); len(rrs) > 0 {
				m.Answer = append(m.Answer, rrs...)
				return res
			}
		case len(o.sets[q.qtype]) > 0:
			m.Answer = append(m.Answer, o.sets[q.qtype]...)
			m.Extra = append(m.Extra, o.glue[q.qtype]...)
			return res
		}
		// NODATA: the name exists, the type does not.
		m.Ns = append(m.Ns, z.negSOA())
		return res
	}
}

// precompute packs each zone's NXDOMAIN template and fills each owner's
// glue: for its MX, SRV and NS sets, the A
// and AAAA records of the targets in any of the zones, in the set's order,
// each target once (RFC 1034 section 3.6.2, RFC 2782; what NSD puts in the
// additional section). Access domains are not followed: their addresses
// depend on the client and on health, and these answers are cached for
// every client.
func (s *snapshot) precompute() {
	for _, z := range s.zones {
		z.neg = newNegTemplate(z)
		for _, o := range z.names {
			for _, t := range [...]uint16{dns.TypeMX, dns.TypeSRV, dns.TypeNS} {
				if g := s.glueOf(o.sets[t]); len(g) > 0 {
					if o.glue == nil {
						o.glue = map[uint16][]dns.RR{}
					}
					o.glue[t] = slices.Clip(g)
				}
			}
		}
	}
}

func (s *snapshot) glueOf(set []dns.RR) []dns.RR {
	var out []dns.RR
	seen := map[string]bool{}
	for _, rr := range set {
		target := strings.ToLower(glueTarget(rr))
		if target == "" || seen[target] {
			continue
		}
		seen[target] = true
		z := s.findZone(target)
		if z == nil {
			continue
		}
		if o := z.names[target]; o != nil {
			out = append(out, o.sets[dns.TypeA]...)
			out = append(out, o.sets[dns.TypeAAAA]...)
		}
	}
	return out
}

// glueTarget is the host name an MX, SRV or NS record points to, or "".
func glueTarget(rr dns.RR) string {
	switch r := rr.(type) {
	case *dns.MX:
		return r.Mx
	case *dns.SRV:
		return r.Target
	case *dns.NS:
		return r.Ns
	}
	return ""
}
