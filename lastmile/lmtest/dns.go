package lmtest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/veerhq/veer/internal/listenpair"
)

// Mode is how a DNSServer answers.
type Mode int32

// DNS server modes.
const (
	Answer   Mode = iota // answer from the records (NXDOMAIN for unknown names)
	ServFail             // SERVFAIL to everything
	Silent               // never answer (the client times out)
	DropUDP              // no answer over UDP; TCP answers normally
	Hijack               // answer every A question with HijackAddr
	Refuse               // REFUSED to everything
)

func (m Mode) String() string {
	return [...]string{"answer", "servfail", "silent", "drop_udp", "hijack", "refuse"}[m]
}

// DNSServer is an authoritative-style test DNS server on UDP and TCP
// 127.0.0.1:port.
type DNSServer struct {
	udp, tcp *dns.Server
	addr     string
	mode     atomic.Int32
	queries  atomic.Int64

	mu      sync.RWMutex
	records map[string][]netip.Addr
	ttl     uint32
	hijack  netip.Addr
	wg      sync.WaitGroup
}

// NewDNSServer starts a server answering records (name -> addresses) with
// ttl seconds.
func NewDNSServer(records map[string][]netip.Addr, ttl uint32) (*DNSServer, error) {
	s := &DNSServer{records: map[string][]netip.Addr{}, ttl: ttl, hijack: netip.MustParseAddr("10.66.66.66")}
	for n, a := range records {
		s.records[dns.CanonicalName(n)] = a
	}
	pc, ln, err := ListenPair()
	if err != nil {
		return nil, err
	}
	s.addr = ln.Addr().String()
	h := dns.HandlerFunc(s.serve)
	s.udp = &dns.Server{PacketConn: pc, Handler: h}
	s.tcp = &dns.Server{Listener: ln, Handler: h}
	started := make(chan struct{}, 2)
	s.udp.NotifyStartedFunc = func() { started <- struct{}{} }
	s.tcp.NotifyStartedFunc = func() { started <- struct{}{} }
	s.wg.Add(2)
	go func() { defer s.wg.Done(); _ = s.udp.ActivateAndServe() }()
	go func() { defer s.wg.Done(); _ = s.tcp.ActivateAndServe() }()
	<-started
	<-started
	return s, nil
}

// Addr is the server's "127.0.0.1:port" (UDP and TCP).
func (s *DNSServer) Addr() string { return s.addr }

// SetMode switches how the server answers.
func (s *DNSServer) SetMode(m Mode) { s.mode.Store(int32(m)) }

// SetRecord replaces the addresses of name.
func (s *DNSServer) SetRecord(name string, addrs ...netip.Addr) {
	s.mu.Lock()
	s.records[dns.CanonicalName(name)] = addrs
	s.mu.Unlock()
}

// SetHijack sets the address a Hijack-mode server answers with.
func (s *DNSServer) SetHijack(a netip.Addr) {
	s.mu.Lock()
	s.hijack = a
	s.mu.Unlock()
}

// Queries is the number of queries received (any mode, any transport).
func (s *DNSServer) Queries() int64 { return s.queries.Load() }

// Resolver returns a pure-Go *net.Resolver that sends every query to this
// server, for the "system" resolver step.
func (s *DNSServer) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, s.addr)
		if err != nil {
			return nil, err
		}
		// The Go resolver keeps a lookup running after its caller gave up
		// (with resolv.conf's timeout); closing the socket when the lookup's
		// context ends keeps tests free of lingering goroutines.
		context.AfterFunc(ctx, func() { c.Close() })
		return c, nil
	}}
}

// Close stops the server and waits for its goroutines.
func (s *DNSServer) Close() error {
	err := errors.Join(s.udp.Shutdown(), s.tcp.Shutdown())
	s.wg.Wait()
	return err
}

func (s *DNSServer) serve(w dns.ResponseWriter, q *dns.Msg) {
	s.queries.Add(1)
	_, udp := w.LocalAddr().(*net.UDPAddr)
	mode := Mode(s.mode.Load())
	switch {
	case mode == Silent, mode == DropUDP && udp, len(q.Question) != 1:
		return // no answer; the client times out
	}
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	qn := q.Question[0]
	switch mode {
	case ServFail:
		m.Rcode = dns.RcodeServerFailure
	case Refuse:
		m.Rcode = dns.RcodeRefused
	default:
		s.mu.RLock()
		addrs, ok := s.records[dns.CanonicalName(qn.Name)]
		hijack := s.hijack
		s.mu.RUnlock()
		if mode == Hijack {
			addrs, ok = []netip.Addr{hijack}, true
		}
		if !ok {
			m.Rcode = dns.RcodeNameError
			break
		}
		hdr := dns.RR_Header{Name: qn.Name, Class: dns.ClassINET, Ttl: s.ttl}
		for _, a := range addrs {
			switch {
			case a.Is4() && qn.Qtype == dns.TypeA:
				h := hdr
				h.Rrtype = dns.TypeA
				m.Answer = append(m.Answer, &dns.A{Hdr: h, A: a.AsSlice()})
			case a.Is6() && qn.Qtype == dns.TypeAAAA:
				h := hdr
				h.Rrtype = dns.TypeAAAA
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: h, AAAA: a.AsSlice()})
			}
		}
	}
	_ = w.WriteMsg(m)
}

// ListenPair opens a UDP socket and a TCP listener on the same
// 127.0.0.1 port.
func ListenPair() (net.PacketConn, net.Listener, error) {
	ln, pc, err := listenpair.Listen("127.0.0.1:0")
	return pc, ln, err
}
