package dnsserver

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRRLSteps drives the limiter's core with exact times.
func TestRRLSteps(t *testing.T) {
	r := newRRL(Config{RRL: RRLConfig{ResponsesPerSecond: 2, Burst: 2}}.withDefaults(1).RRL)
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at   time.Duration
		from string
		want rrlDecision
	}{
		{0, "198.51.100.1", rrlAllow},
		{0, "198.51.100.2", rrlAllow}, // same /24: same bucket
		{0, "198.51.100.1", rrlDrop},
		{0, "198.51.100.1", rrlSlip}, // every 2nd limited answer slips
		{0, "198.51.100.9", rrlDrop},
		{0, "198.51.100.1", rrlSlip},
		{0, "203.0.113.1", rrlAllow},                       // another /24
		{0, "2001:db8:0:ff::1", rrlAllow},                  // IPv6 /56
		{0, "2001:db8:0:1::1", rrlAllow},                   // same /56
		{0, "2001:db8:0:2::1", rrlDrop},                    // same /56, empty
		{0, "2001:db8:1::1", rrlAllow},                     // another /56
		{499 * time.Millisecond, "198.51.100.1", rrlDrop},  // 0.998 token
		{500 * time.Millisecond, "198.51.100.1", rrlAllow}, // one token back
		{500 * time.Millisecond, "198.51.100.1", rrlDrop},  // the slip count restarted
		{500 * time.Millisecond, "198.51.100.1", rrlSlip},
		{10 * time.Second, "198.51.100.1", rrlAllow}, // refilled, capped at burst
		{10 * time.Second, "198.51.100.1", rrlAllow},
		{10 * time.Second, "198.51.100.1", rrlDrop},
		{10 * time.Second, "::ffff:198.51.100.1", rrlSlip}, // v4-mapped is the v4 client
	}
	for i, st := range steps {
		if got := r.decide(netip.MustParseAddr(st.from), t0.Add(st.at)); got != st.want {
			t.Errorf("step %d (%v %s): %d, want %d", i, st.at, st.from, got, st.want)
		}
	}
}

// TestRRLBounded floods from many prefixes: the table stays bounded.
func TestRRLBounded(t *testing.T) {
	r := newRRL(Config{RRL: RRLConfig{ResponsesPerSecond: 1, MaxClients: 64}}.withDefaults(1).RRL)
	now := time.Unix(0, 0)
	for i := range 10000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1})
		r.decide(a, now)
	}
	n := 0
	for i := range r.shards {
		n += len(r.shards[i].m)
	}
	if n > 64 {
		t.Errorf("%d prefixes tracked, want at most 64", n)
	}
}

// TestRRLOverUDP: a limited client gets drops and TC slips over UDP, and
// full answers over TCP.
func TestRRLOverUDP(t *testing.T) {
	cfg := parseConfig(t, testZone+"rrl: {responses_per_second: 0.01, burst: 1, slip: 2}\n")
	cfg.UDPWorkers = 1
	s := startServer(t, cfg, Options{})
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for id := uint16(1); id <= 5; id++ {
		q := new(dns.Msg)
		q.SetQuestion("www.example.test.", dns.TypeA)
		q.Id = id
		wire, _ := q.Pack()
		c.Write(wire)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	type got struct {
		id      uint16
		tc      bool
		answers int
	}
	var all []got
	buf := make([]byte, 2048)
	for len(all) < 3 {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("after %v: %v", all, err)
		}
		var m dns.Msg
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatal(err)
		}
		all = append(all, got{m.Id, m.Truncated, len(m.Answer)})
	}
	want := []got{{1, false, 2}, {3, true, 0}, {5, true, 0}}
	for i := range want {
		if all[i] != want[i] {
			t.Errorf("answers %v, want %v", all, want)
			break
		}
	}
	if d, sl := testutil.ToFloat64(s.m.dropped.WithLabelValues(dropRRL)), testutil.ToFloat64(s.m.slipped); d != 2 || sl != 2 {
		t.Errorf("dropped{rrl} %v slipped %v, want 2 and 2", d, sl)
	}
	if r := ask(t, "tcp", s.Addr(), "www.example.test.", dns.TypeA, 0); len(r.Answer) != 2 || r.Truncated {
		t.Errorf("TCP while limited: %d answers tc %v, want the full answer", len(r.Answer), r.Truncated)
	}
}
