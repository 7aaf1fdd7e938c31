package dnsserver

import (
	"bytes"
	"encoding/binary"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// negTemplate is a zone's NXDOMAIN answer packed once, for a question of
// the origin itself: the header and the SOA record that follows the
// question, whose compression pointers (into the question's origin or into
// the record itself) move by as many bytes as a real question's name is
// longer than the origin. The answer to a name that does not exist is then
// a copy, as fast as a cached one, whatever the name (random-name floods
// included), and byte for byte what the full path packs.
type negTemplate struct {
	header    [12]byte
	tail      []byte // the SOA record
	ptrs      []int  // offsets in tail of its compression pointers
	originLen int    // the origin's length in wire format
	// below are the names in the SOA data under the origin and their
	// suffixes longer than it: the full path compresses a name under one
	// of them into the question differently, so those take it.
	below []string
}

// newNegTemplate packs z's NXDOMAIN answer; nil if anything is unusual.
func newNegTemplate(z *zone) *negTemplate {
	m := new(dns.Msg)
	m.SetQuestion(z.origin, dns.TypeA)
	m.Response, m.Authoritative, m.Rcode, m.RecursionDesired = true, true, dns.RcodeNameError, false
	m.Ns = []dns.RR{z.negSOA()}
	m.Compress = true
	w, err := m.Pack()
	if err != nil {
		return nil
	}
	t := &negTemplate{originLen: nameLen(w, 12)}
	if t.originLen <= 0 {
		return nil
	}
	copy(t.header[:], w[:12])
	t.tail = w[12+t.originLen+4:]
	// owner, type, class, TTL, rdlength, then MNAME and RNAME, 20 bytes.
	off, ok := t.pointers(0)
	if !ok || off+10 > len(t.tail) {
		return nil
	}
	if off, ok = t.pointers(off + 10); !ok {
		return nil
	}
	if off, ok = t.pointers(off); !ok || off+20 != len(t.tail) {
		return nil
	}
	for _, n := range []string{z.soa.Ns, z.soa.Mbox} {
		n = strings.ToLower(n)
		for ; n != "" && n != z.origin && dns.IsSubDomain(z.origin, n); n = parent(n) {
			t.below = append(t.below, n)
		}
	}
	return t
}

// pointers walks the name at off in t.tail, noting its compression
// pointer, and returns the offset after it.
func (t *negTemplate) pointers(off int) (int, bool) {
	for off < len(t.tail) {
		l := int(t.tail[off])
		switch {
		case l == 0:
			return off + 1, true
		case l&0xc0 == 0xc0:
			if off+2 > len(t.tail) {
				return 0, false
			}
			t.ptrs = append(t.ptrs, off)
			return off + 2, true
		case l > 63:
			return 0, false
		}
		off += 1 + l
	}
	return 0, false
}

// nameLen is the length of the uncompressed name at off in w, or -1.
func nameLen(w []byte, off int) int {
	start := off
	for off < len(w) {
		l := int(w[off])
		if l == 0 {
			return off + 1 - start
		}
		if l > 63 {
			return -1
		}
		off += 1 + l
	}
	return -1
}

// findZoneKey is findZone for a name in the cache key's form (lower case,
// absolute), without allocating.
func (s *snapshot) findZoneKey(name []byte) *zone {
	for i := 0; i < len(name); {
		if z := s.zones[string(name[i:])]; z != nil {
			return z
		}
		j := bytes.IndexByte(name[i:], '.')
		if j < 0 || i+j+1 >= len(name) {
			break
		}
		i += j + 1
	}
	return s.zones["."]
}

// fastNegative answers a plain query for a name outside our zones
// (REFUSED) or that does not exist in its zone (NXDOMAIN, from the zone's
// template) without unpacking it. ok is false for anything else, and when
// the answer would not fit the query's size bounds: the full path takes it.
func (s *Server) fastNegative(st *state, q plainQuery, wire []byte, tr Transport, buf []byte, start time.Time) ([]byte, bool) {
	name := q.key[:len(q.key)-3] // the name, without qtype and EDNS flag
	z := st.snap.findZoneKey(name)
	var out []byte
	rcode := dns.RcodeRefused
	extra := 0
	if q.edns {
		extra = 11
	}
	switch {
	case z == nil:
		if 12+(q.qend-12)+extra > s.limit(st, q, wire, tr) {
			return nil, false
		}
		out = append(buf[:0], wire[:q.qend]...)
		out[2] = 0x80 | wire[2]&0x01 // QR, opcode QUERY, RD as asked
		out[3] = wire[3]&0x10 | byte(dns.RcodeRefused)
		clear(out[6:12]) // no answer, authority or additional records yet
	default:
		if _, exists := z.names[string(name)]; exists {
			return nil, false
		}
		t := z.neg
		if t == nil || t.covers(name) {
			return nil, false
		}
		k := q.qend - 4 - 12 - t.originLen // how much longer than the origin
		if k < 0 || 12+(q.qend-12)+len(t.tail)+extra > s.limit(st, q, wire, tr) || q.qend+len(t.tail) >= 0x4000 {
			return nil, false
		}
		rcode = dns.RcodeNameError
		out = append(buf[:0], t.header[:]...)
		copy(out[0:2], wire[0:2])
		out[2] = out[2]&^0x01 | wire[2]&0x01
		out[3] = out[3]&^0x10 | wire[3]&0x10
		out = append(out, wire[12:q.qend]...)
		base := len(out)
		out = append(out, t.tail...)
		for _, p := range t.ptrs {
			v := binary.BigEndian.Uint16(out[base+p:])&0x3fff + uint16(k)
			binary.BigEndian.PutUint16(out[base+p:], 0xc000|v)
		}
	}
	if q.edns {
		binary.BigEndian.PutUint16(out[10:], 1)
		// The root name, type OPT, class = our UDP size, TTL 0 (extended
		// rcode, version, flags), no data: what addOPT packs.
		out = append(out, 0, byte(dns.TypeOPT>>8), byte(dns.TypeOPT), byte(st.cfg.UDPSize>>8), byte(st.cfg.UDPSize), 0, 0, 0, 0, 0, 0)
	}
	s.m.query(tr, q.qtype, rcode)
	s.m.latency[tr].Observe(time.Since(start).Seconds())
	return out, true
}

// covers reports whether name is, or is under, one of t.below.
func (t *negTemplate) covers(name []byte) bool {
	for _, b := range t.below {
		if bytes.HasSuffix(name, []byte(b)) && (len(name) == len(b) || name[len(name)-len(b)-1] == '.') {
			return true
		}
	}
	return false
}
