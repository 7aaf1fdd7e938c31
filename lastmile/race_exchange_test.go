package lastmile

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/veerhq/veer/lastmile/lmtest"
)

// TestRaceExchangeLoserLetsGo: when UDP wins the UDP/TCP race, the TCP
// exchange still waiting for its answer closes its connection at once,
// instead of holding the socket and its goroutine until the step's timeout
// (miekg/dns reads until its deadline whatever the context says; goleak
// found such a loser still reading after a dnsserver test had ended).
func TestRaceExchangeLoserLetsGo(t *testing.T) {
	pc, ln, err := lmtest.ListenPair()
	if err != nil {
		t.Fatal(err)
	}
	// UDP answers once the TCP exchange has sent its question, so that the
	// race is decided while the TCP loser is in flight: were UDP to answer
	// first, the race could end before TCP dialled, and then no connection
	// would ever be made for the test to see released (which failed beside
	// a CPU hog, 1 run in about 100).
	tcpAsked := make(chan struct{})
	udp := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		select {
		case <-tcpAsked:
		case <-time.After(10 * time.Second): // then released below fails, saying why
		}
		m := new(dns.Msg)
		m.SetReply(q)
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(10, 0, 0, 1)})
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	udp.NotifyStartedFunc = func() { close(started) }
	go func() { _ = udp.ActivateAndServe() }()
	t.Cleanup(func() { _ = udp.Shutdown() })
	<-started
	// TCP accepts and reads the question, and never answers; released
	// reports when the client closed the connection.
	released := make(chan struct{})
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		if _, err := io.ReadFull(c, make([]byte, int(n[0])<<8|int(n[1]))); err != nil {
			return
		}
		close(tcpAsked)
		_, _ = io.Copy(io.Discard, c)
		close(released)
	}()

	r, err := NewResolver(DNSConfig{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := new(dns.Msg)
	q.SetQuestion("race.example.", dns.TypeA)
	m, err := r.raceExchange(ctx, ln.Addr().String(), q, false)
	if err != nil || len(m.Answer) != 1 {
		t.Fatalf("race: %v, %v; want the UDP answer", m, err)
	}
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		select {
		case <-tcpAsked:
			t.Fatal("the losing TCP exchange still held its connection 10 s after the race was decided (its deadline is a minute away)")
		default:
			t.Fatal("the TCP exchange never sent its question (UDP answered after 10 s without it)")
		}
	}
}
