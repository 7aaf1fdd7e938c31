package dnsserver

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// maxCached bounds the packed answers kept per state.
const maxCached = 10000

// answerCache keeps the packed answers of static names (never of access
// domains, whose answers depend on the client and on health) for one state:
// Apply makes a new state, so a reload empties it. A hit costs a map look-up
// and a copy instead of unpacking, looking up and packing.
type answerCache struct {
	mu sync.RWMutex
	m  map[string]cachedAnswer
}

type cachedAnswer struct {
	wire  []byte
	rcode int
}

func newAnswerCache() *answerCache { return &answerCache{m: map[string]cachedAnswer{}} }

// plainQuery is what the fast path knows of a query of the common shape:
// one IN question, no compression in it, labels of letters, digits, '-'
// and '_' only, no answer or authority records, and either no additional
// record or one OPT without options.
type plainQuery struct {
	key     []byte // lower-case name, qtype, EDNS flag
	qtype   uint16
	qend    int // end of the question section
	edns    bool
	udpSize int
}

// parsePlain recognises a query of the common shape; ok is false for
// anything else, which the full path handles.
func parsePlain(wire []byte, key []byte) (q plainQuery, ok bool) {
	if len(wire) < 17 || wire[2]&0xf8 != 0 || // QR=0, opcode QUERY
		binary.BigEndian.Uint16(wire[4:]) != 1 || binary.BigEndian.Uint16(wire[6:]) != 0 ||
		binary.BigEndian.Uint16(wire[8:]) != 0 {
		return q, false
	}
	ar := binary.BigEndian.Uint16(wire[10:])
	if ar > 1 {
		return q, false
	}
	off := 12
	key = key[:0]
	for {
		if off >= len(wire) {
			return q, false
		}
		l := int(wire[off])
		if l == 0 {
			off++
			break
		}
		if l > 63 || off+1+l > len(wire) || len(key)+l+1 > 255 {
			return q, false
		}
		for _, c := range wire[off+1 : off+1+l] {
			switch {
			case 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			default:
				// A byte the text form escapes (a dot inside a label, a
				// space, ...): the key would not be the zone's name.
				return q, false
			}
			key = append(key, c)
		}
		key = append(key, '.')
		off += 1 + l
	}
	if off+4 > len(wire) {
		return q, false
	}
	q.qtype = binary.BigEndian.Uint16(wire[off:])
	if binary.BigEndian.Uint16(wire[off+2:]) != dns.ClassINET {
		return q, false
	}
	switch q.qtype {
	case dns.TypeANY, dns.TypeAXFR, dns.TypeIXFR, dns.TypeOPT:
		return q, false
	}
	off += 4
	q.qend = off
	if ar == 1 {
		// OPT: root name, type 41, class = UDP size, TTL = ext rcode 0,
		// version 0, flags; no options.
		if off+11 != len(wire) || wire[off] != 0 || binary.BigEndian.Uint16(wire[off+1:]) != dns.TypeOPT ||
			wire[off+5] != 0 || wire[off+6] != 0 || binary.BigEndian.Uint16(wire[off+9:]) != 0 {
			return q, false
		}
		q.edns = true
		q.udpSize = max(int(binary.BigEndian.Uint16(wire[off+3:])), dns.MinMsgSize)
	} else if off != len(wire) {
		return q, false
	}
	if len(key) == 0 {
		key = append(key, '.')
	}
	key = binary.BigEndian.AppendUint16(key, q.qtype)
	if q.edns {
		key = append(key, 1)
	} else {
		key = append(key, 0)
	}
	q.key = key
	return q, true
}

// fast answers q from the cache: the cached answer with the query's ID,
// RD and CD flags and question bytes (so its letter case). ok is false on a
// miss or when the cached answer does not fit this query's size bounds.
func (s *Server) fast(st *state, q plainQuery, wire []byte, tr Transport, buf []byte, start time.Time) ([]byte, bool) {
	st.cache.mu.RLock()
	c, hit := st.cache.m[string(q.key)]
	st.cache.mu.RUnlock()
	if !hit {
		return s.fastNegative(st, q, wire, tr, buf, start)
	}
	limit := s.limit(st, q, wire, tr)
	if len(c.wire) > limit {
		return nil, false
	}
	out := append(buf[:0], c.wire...)
	copy(out[0:2], wire[0:2])             // ID
	out[2] = out[2]&^0x01 | wire[2]&0x01  // RD
	out[3] = out[3]&^0x10 | wire[3]&0x10  // CD
	copy(out[12:q.qend], wire[12:q.qend]) // the question as asked
	s.m.query(tr, q.qtype, c.rcode)
	s.m.latency[tr].Observe(time.Since(start).Seconds())
	return out, true
}

// limit is the largest answer to q over tr (see Answer).
func (s *Server) limit(st *state, q plainQuery, wire []byte, tr Transport) int {
	limit := st.cfg.MaxAnswerBytes
	if tr == UDP {
		client := dns.MinMsgSize
		if q.edns {
			client = q.udpSize
		}
		limit = min(limit, client, st.cfg.UDPSize, st.cfg.Amplification*len(wire))
	}
	return limit
}

// put stores a full (not truncated) answer to a plain query.
func (c *answerCache) put(key []byte, wire []byte, rcode int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCached {
		return
	}
	c.m[string(key)] = cachedAnswer{wire: append([]byte(nil), wire...), rcode: rcode}
}
