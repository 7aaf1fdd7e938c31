package dnsserver

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// zone is one compiled zone. It is immutable once finish has run.
type zone struct {
	origin string
	soa    *dns.SOA
	names  map[string]*owner // every owner name and empty non-terminal, lower case
	neg    *negTemplate      // the NXDOMAIN answer, packed
}

// owner is the data at one name.
type owner struct {
	sets   map[uint16][]dns.RR
	glue   map[uint16][]dns.RR // additional records of the MX, SRV and NS sets
	access *accessDomain
}

func newZone(origin string) *zone {
	return &zone{origin: origin, names: map[string]*owner{}}
}

func (z *zone) owner(name string) *owner {
	o := z.names[name]
	if o == nil {
		o = &owner{sets: map[uint16][]dns.RR{}}
		z.names[name] = o
	}
	return o
}

func (z *zone) add(rr dns.RR) {
	h := rr.Header()
	o := z.owner(h.Name)
	o.sets[h.Rrtype] = append(o.sets[h.Rrtype], rr)
}

// ErrConflict is a record that breaks the zone's rules: CNAME beside other
// data or at the apex, a duplicate, TTLs that differ within one set, an
// access domain that also has address records.
var ErrConflict = errors.New("conflicting record")

// addChecked adds a record from the records list, enforcing the rules the
// lookup relies on.
func (z *zone) addChecked(rr dns.RR) error {
	h := rr.Header()
	o := z.names[h.Name]
	if h.Rrtype == dns.TypeCNAME {
		if h.Name == z.origin {
			return fmt.Errorf("%w: CNAME at the zone apex %s", ErrConflict, h.Name)
		}
		if o != nil && (len(o.sets) > 0 || o.access != nil) {
			return fmt.Errorf("%w: CNAME at %s, which has other data", ErrConflict, h.Name)
		}
	} else if o != nil && len(o.sets[dns.TypeCNAME]) > 0 {
		return fmt.Errorf("%w: %s has a CNAME, no other data allowed", ErrConflict, h.Name)
	}
	if o != nil {
		for _, old := range o.sets[h.Rrtype] {
			if dns.IsDuplicate(old, rr) {
				return fmt.Errorf("%w: duplicate of %s", ErrConflict, old.String())
			}
		}
		if len(o.sets[h.Rrtype]) > 0 && o.sets[h.Rrtype][0].Header().Ttl != h.Ttl {
			return fmt.Errorf("%w: TTL %d differs from the rest of the %s %s set (%d)", ErrConflict,
				h.Ttl, h.Name, dns.TypeToString[h.Rrtype], o.sets[h.Rrtype][0].Header().Ttl)
		}
	}
	z.add(rr)
	return nil
}

func (z *zone) addAccess(a *accessDomain) error {
	o := z.owner(a.name)
	switch {
	case o.access != nil:
		return fmt.Errorf("%w: access domain %s listed twice", ErrConflict, a.name)
	case len(o.sets[dns.TypeA]) > 0 || len(o.sets[dns.TypeAAAA]) > 0 || len(o.sets[dns.TypeCNAME]) > 0:
		return fmt.Errorf("%w: access domain %s also has A, AAAA or CNAME records", ErrConflict, a.name)
	}
	o.access = a
	return nil
}

// finish adds the empty non-terminals (names with no data but data below
// them), which exist and so answer NODATA, not NXDOMAIN (RFC 8020).
func (z *zone) finish() {
	names := make([]string, 0, len(z.names))
	for n := range z.names {
		names = append(names, n)
	}
	for _, n := range names {
		for p := parent(n); p != "" && dns.IsSubDomain(z.origin, p) && p != z.origin; p = parent(p) {
			z.owner(p)
		}
	}
	z.owner(z.origin)
	for _, o := range z.names {
		for t, set := range o.sets {
			o.sets[t] = slices.Clip(set)
		}
	}
}

// parent returns name without its first label, "" for the root.
func parent(name string) string {
	i := strings.IndexByte(name, '.')
	if i < 0 || i == len(name)-1 {
		return ""
	}
	return name[i+1:]
}

// negTTL is the TTL of a negative answer's SOA (RFC 2308 section 5).
func (z *zone) negTTL() uint32 {
	return min(z.soa.Hdr.Ttl, z.soa.Minttl)
}

// soaRR returns the SOA with the negative-answer TTL.
func (z *zone) negSOA() dns.RR {
	soa := *z.soa
	soa.Hdr.Ttl = z.negTTL()
	return &soa
}
