package dnsserver

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTCPLimits: connections over max_tcp_conns are closed at once and
// counted; an idle connection is closed after tcp_idle; a pipelined
// connection gets its answers in order.
func TestTCPLimits(t *testing.T) {
	cfg := parseConfig(t, testZone+"max_tcp_conns: 1\ntcp_idle: 300ms\n")
	s := startServer(t, cfg, Options{})
	first, err := dns.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	// Two queries written back to back, answered in order.
	for _, id := range []uint16{1, 2} {
		q := new(dns.Msg)
		q.SetQuestion("www.example.test.", dns.TypeA)
		q.Id = id
		if err := first.WriteMsg(q); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []uint16{1, 2} {
		r, err := first.ReadMsg()
		if err != nil || r.Id != id || len(r.Answer) != 2 {
			t.Fatalf("pipelined answer %d: %v %v", id, r, err)
		}
	}
	// The one slot is taken: a second connection is closed unanswered.
	second, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	second.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := second.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("second connection: read %d, %v; want EOF", n, err)
	}
	if got := testutil.ToFloat64(s.m.dropped.WithLabelValues(dropTCPLimit)); got != 1 {
		t.Errorf("dropped{tcp_conn_limit} = %v, want 1", got)
	}
	// The first connection, now idle, is closed by the server after
	// tcp_idle (the read returns when it is; the deadline only bounds it).
	start := time.Now()
	first.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := first.ReadMsg(); err == nil {
		t.Fatal("idle connection still open")
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Errorf("idle connection closed after %v, want about 300ms", el)
	}
}
