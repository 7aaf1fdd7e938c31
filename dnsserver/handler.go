package dnsserver

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Answer handles one query in wire format from the client address src,
// arrived over tr, and returns the response in wire format (built in buf
// when it is large enough). ok is false when the query gets no answer: it
// is malformed, it is itself a response, or response rate limiting dropped
// it. Answer is safe for concurrent use and never blocks; transports call
// it, and so may a caller with its own transport.
//
// UDP answers are bounded by the client's EDNS0 size (512 without EDNS0),
// Config.UDPSize and Config.Amplification times the query's size; every
// answer by Config.MaxAnswerBytes. What does not fit is left out and TC set.
func (s *Server) Answer(wire []byte, src netip.Addr, tr Transport, buf []byte) (out []byte, ok bool) {
	start := time.Now()
	st := s.state.Load()
	var (
		pq    plainQuery
		plain bool
		kb    [260]byte
	)
	if tr != UDP || st.rrl == nil { // rate-limited queries take the full path
		if pq, plain = parsePlain(wire, kb[:0]); plain {
			if out, ok := s.fast(st, pq, wire, tr, buf, start); ok {
				return out, true
			}
		}
	}
	return s.answerFull(st, wire, src, tr, buf, start, pq, plain)
}

// answerFull is Answer's full path: unpack, look up, pack. pq is the
// parsed query when plain.
func (s *Server) answerFull(st *state, wire []byte, src netip.Addr, tr Transport, buf []byte, start time.Time, pq plainQuery, plain bool) (out []byte, ok bool) {
	req := new(dns.Msg)
	if err := req.Unpack(wire); err != nil {
		s.m.dropped.WithLabelValues(dropMalformed).Inc()
		return nil, false
	}
	if req.Response {
		// Never answer an answer: that is how reflection loops start.
		s.m.dropped.WithLabelValues(dropResponse).Inc()
		return nil, false
	}
	resp := new(dns.Msg)
	resp.SetReply(req)
	lname := ""
	if len(resp.Question) == 1 {
		// Packed in lower case, so that every name of ours with the same
		// suffix is compressed into the question; pack then puts the
		// question's bytes back as asked, and those names read in its case
		// (0x20, as NSD and Knot answer).
		lname = strings.ToLower(resp.Question[0].Name)
		resp.Question[0].Name = lname
	}
	resp.RecursionDesired = req.RecursionDesired
	resp.CheckingDisabled = req.CheckingDisabled
	opt := req.IsEdns0()
	qtype := uint16(0)
	if len(req.Question) > 0 {
		qtype = req.Question[0].Qtype
	}
	if tr == UDP && st.rrl != nil {
		switch st.rrl.decide(src, start) {
		case rrlDrop:
			s.m.dropped.WithLabelValues(dropRRL).Inc()
			return nil, false
		case rrlSlip:
			s.m.slipped.Inc()
			resp.Truncated = true
			s.addOPT(resp, opt, nil, false, st)
			return s.pack(resp, wire, buf, st.cfg.MaxAnswerBytes, tr, qtype, start)
		}
	}
	var ecs *dns.EDNS0_SUBNET
	scoped, looked := false, false
	switch {
	case req.Opcode != dns.OpcodeQuery:
		resp.Rcode = dns.RcodeNotImplemented
	case len(req.Question) != 1 || countOPT(req) > 1:
		resp.Rcode = dns.RcodeFormatError
	case opt != nil && opt.Version() != 0:
		resp.Rcode = dns.RcodeBadVers
	default:
		q := req.Question[0]
		switch {
		case q.Qclass != dns.ClassINET:
			resp.Rcode = dns.RcodeRefused
		case q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR:
			resp.Rcode = dns.RcodeRefused // no zone transfers
		default:
			client := src
			if opt != nil {
				ecs = clientSubnet(opt)
				if ecs != nil && ecs.SourceNetmask > 0 {
					if a, ok := netip.AddrFromSlice(ecs.Address); ok {
						client = a.Unmap()
					}
				}
			}
			r := st.snap.lookup(query{name: lname, qtype: q.Qtype, client: client, health: s.health.up}, resp)
			resp.Rcode, resp.Authoritative, scoped, looked = r.rcode, r.auth, r.scoped, true
		}
	}
	s.addOPT(resp, opt, ecs, scoped, st)
	limit := st.cfg.MaxAnswerBytes
	if tr == UDP {
		client := dns.MinMsgSize
		if opt != nil {
			client = max(int(opt.UDPSize()), dns.MinMsgSize)
		}
		limit = min(limit, client, st.cfg.UDPSize)
	}
	trimmed := false
	if resp.Len() > limit {
		// Additional records are optional (RFC 2181 section 9): leave them
		// out before the answer, without TC.
		if trimmed = dropExtra(resp); resp.Len() > limit {
			resp.Truncate(limit)
			s.m.truncated.WithLabelValues("size").Inc()
		}
	}
	out, ok = s.packOnly(resp, wire, buf, 0)
	if ok && tr == UDP && len(out) > st.cfg.Amplification*len(wire) && dropExtra(resp) {
		trimmed = true
		out, ok = s.packOnly(resp, wire, buf, 0)
	}
	if ok && plain && looked && !scoped && !trimmed && !resp.Truncated && (len(resp.Answer) > 0 || resp.Rcode == dns.RcodeSuccess) {
		// Only answers with records and NODATA: the names and types of the
		// zones bound them, where random names (NXDOMAIN, answered from the
		// zone's template) would not.
		st.cache.put(pq.key, out, resp.Rcode)
	}
	if ok && tr == UDP && len(out) > st.cfg.Amplification*len(wire) && len(out) > 0 {
		// Amplification bound: a small query gets a small answer; a real
		// client retries over TCP.
		resp.Answer, resp.Ns, resp.Extra = nil, nil, nil
		resp.Truncated = true
		s.addOPT(resp, opt, ecs, scoped, st)
		s.m.truncated.WithLabelValues("amplification").Inc()
		out, ok = s.packOnly(resp, wire, buf, 0)
	}
	if ok {
		s.count(tr, qtype, resp.Rcode, start)
	}
	return out, ok
}

// pack packs resp (packOnly) and counts the answer and its latency.
func (s *Server) pack(resp *dns.Msg, wire, buf []byte, limit int, tr Transport, qtype uint16, start time.Time) ([]byte, bool) {
	out, ok := s.packOnly(resp, wire, buf, limit)
	if ok {
		s.count(tr, qtype, resp.Rcode, start)
	}
	return out, ok
}

// count counts one answer and its latency.
func (s *Server) count(tr Transport, qtype uint16, rcode int, start time.Time) {
	s.m.query(tr, qtype, rcode)
	s.m.latency[tr].Observe(time.Since(start).Seconds())
}

// packOnly packs resp and puts the question of the query wire back in its
// letter case.
func (s *Server) packOnly(resp *dns.Msg, wire, buf []byte, limit int) ([]byte, bool) {
	if limit > 0 && resp.Len() > limit {
		resp.Truncate(limit)
	}
	resp.Compress = true
	out, err := resp.PackBuffer(buf)
	if err != nil {
		// Our own data failed to pack: answer SERVFAIL with the question only.
		resp.Answer, resp.Ns, resp.Extra = nil, nil, nil
		resp.Rcode = dns.RcodeServerFailure
		if out, err = resp.PackBuffer(buf); err != nil {
			s.m.dropped.WithLabelValues(dropMalformed).Inc()
			return nil, false
		}
	}
	restoreQuestion(out, wire)
	return out, true
}

// restoreQuestion copies the question name of the query wire over the one
// packed in out when the two are the same name in other letter cases, so
// that the answer's names compressed into it take the query's case. It
// does nothing when either has no question or the query's name is
// compressed.
func restoreQuestion(out, wire []byte) {
	if len(out) < 12 || len(wire) < 12 || binary.BigEndian.Uint16(out[4:]) != 1 {
		return
	}
	end := 12
	for {
		if end >= len(wire) || end >= len(out) {
			return
		}
		l := int(wire[end])
		if l == 0 {
			end++
			break
		}
		if l > 63 {
			return // a pointer or a reserved label type
		}
		end += 1 + l
	}
	if end > len(out) || !asciiEqualFold(out[12:end], wire[12:end]) {
		return
	}
	copy(out[12:end], wire[12:end])
}

// asciiEqualFold reports whether a and b are equal but for the case of
// ASCII letters (the only case DNS ignores, RFC 4343).
func asciiEqualFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// dropExtra removes the additional records but the OPT; it reports whether
// there were any.
func dropExtra(resp *dns.Msg) bool {
	out, dropped := resp.Extra[:0], false
	for _, rr := range resp.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			out = append(out, rr)
		} else {
			dropped = true
		}
	}
	resp.Extra = out
	return dropped
}

// addOPT sets resp's OPT record when the query had one (RFC 6891): our UDP
// size, and the client subnet echoed with its scope (RFC 7871 section 7.2.1:
// the source prefix when the answer depends on the address, 0 otherwise).
func (s *Server) addOPT(resp *dns.Msg, reqOPT *dns.OPT, ecs *dns.EDNS0_SUBNET, scoped bool, st *state) {
	if reqOPT == nil {
		return
	}
	resp.Extra = slicesDeleteOPT(resp.Extra)
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(uint16(st.cfg.UDPSize))
	if ecs != nil {
		e := *ecs
		e.SourceScope = 0
		if scoped {
			e.SourceScope = e.SourceNetmask
		}
		o.Option = append(o.Option, &e)
	}
	resp.Extra = append(resp.Extra, o)
}

func slicesDeleteOPT(rrs []dns.RR) []dns.RR {
	out := rrs[:0]
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, rr)
		}
	}
	return out
}

func countOPT(m *dns.Msg) int {
	n := 0
	for _, rr := range m.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			n++
		}
	}
	return n
}

// clientSubnet returns the query's EDNS Client Subnet option (RFC 7871) if
// it is well formed: family 1 or 2, netmask within the family, the address
// of that family.
func clientSubnet(opt *dns.OPT) *dns.EDNS0_SUBNET {
	for _, o := range opt.Option {
		e, ok := o.(*dns.EDNS0_SUBNET)
		if !ok {
			continue
		}
		switch {
		case e.Family == 1 && e.SourceNetmask <= 32 && e.Address.To4() != nil:
			e.Address = e.Address.To4().Mask(net.CIDRMask(int(e.SourceNetmask), 32))
		case e.Family == 2 && e.SourceNetmask <= 128 && len(e.Address) == net.IPv6len:
			e.Address = e.Address.Mask(net.CIDRMask(int(e.SourceNetmask), 128))
		default:
			return nil
		}
		return e
	}
	return nil
}
