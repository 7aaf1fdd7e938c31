package dnsserver

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// bigZone has a 40-record TXT set of about 4 KB at big.example.test.
func bigZone(extra string) string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nudp_workers: 1\n" + extra + "zones:\n  - origin: example.test.\n    records:\n")
	for i := range 40 {
		fmt.Fprintf(&b, "      - 'big TXT \"%02d %s\"'\n", i, strings.Repeat("x", 90))
	}
	b.WriteString("      - 'www A 192.0.2.10'\n")
	return b.String()
}

func TestTruncation(t *testing.T) {
	s := startServer(t, parseConfig(t, bigZone("max_answer_bytes: 3000\namplification: 100\n")), Options{})
	cases := []struct {
		name      string
		network   string
		edns      int
		tc        bool
		maxLen    int
		minAnswer int
	}{
		{"UDP without EDNS0: 512 bytes", "udp", 0, true, 512, 1},
		{"UDP EDNS0 4096 capped by udp_size 1232", "udp", 4096, true, DefaultUDPSize, 5},
		{"UDP EDNS0 below 512 counts as 512", "udp", 300, true, 512, 1},
		{"TCP: up to max_answer_bytes", "tcp", 1232, true, 3000, 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ask(t, c.network, s.Addr(), "big.example.test.", dns.TypeTXT, c.edns)
			r.Compress = true // as it was on the wire
			wire, err := r.Pack()
			if err != nil {
				t.Fatal(err)
			}
			if r.Truncated != c.tc || len(wire) > c.maxLen || len(r.Answer) < c.minAnswer || len(r.Answer) == 40 {
				t.Errorf("tc %v, %d bytes, %d records; want tc %v, at most %d bytes, %d..39 records",
					r.Truncated, len(wire), len(r.Answer), c.tc, c.maxLen, c.minAnswer)
			}
		})
	}
	t.Run("TCP with the default cap: everything", func(t *testing.T) {
		s := startServer(t, parseConfig(t, bigZone("")), Options{})
		r := ask(t, "tcp", s.Addr(), "big.example.test.", dns.TypeTXT, 0)
		if r.Truncated || len(r.Answer) != 40 {
			t.Errorf("tc %v, %d records; want all 40", r.Truncated, len(r.Answer))
		}
	})
	if got := testutil.ToFloat64(s.m.truncated.WithLabelValues("size")); got != 4 {
		t.Errorf("truncated{size} = %v, want 4", got)
	}
}

func TestAmplificationBound(t *testing.T) {
	s := startServer(t, parseConfig(t, bigZone("amplification: 3\n")), Options{})
	q := new(dns.Msg)
	q.SetQuestion("big.example.test.", dns.TypeTXT)
	q.SetEdns0(4096, false)
	qwire, _ := q.Pack()
	r := exchange(t, "udp", s.Addr(), q)
	r.Compress = true
	rwire, _ := r.Pack()
	if !r.Truncated || len(r.Answer) != 0 || len(rwire) > 3*len(qwire) {
		t.Errorf("tc %v, %d records, %d bytes for a %d-byte query; want an empty TC answer within 3x",
			r.Truncated, len(r.Answer), len(rwire), len(qwire))
	}
	if r := exchange(t, "tcp", s.Addr(), q); r.Truncated || len(r.Answer) != 40 {
		t.Errorf("over TCP: tc %v, %d records; want all 40 (no amplification over TCP)", r.Truncated, len(r.Answer))
	}
	if r := ask(t, "udp", s.Addr(), "www.example.test.", dns.TypeA, 1232); r.Truncated || len(r.Answer) != 1 {
		t.Errorf("small answer: tc %v, %d records; want it whole", r.Truncated, len(r.Answer))
	}
	if got := testutil.ToFloat64(s.m.truncated.WithLabelValues("amplification")); got != 1 {
		t.Errorf("truncated{amplification} = %v, want 1", got)
	}
}

// TestMalformedDropped sends garbage, a truncated header, a bad body and a
// response; none gets an answer, each is counted, and the server keeps
// answering.
func TestMalformedDropped(t *testing.T) {
	s := startServer(t, parseConfig(t, testZone+"\n"), Options{})
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	good := new(dns.Msg)
	good.SetQuestion("www.example.test.", dns.TypeA)
	goodWire, _ := good.Pack()
	badBody := append([]byte(nil), goodWire[:14]...) // header says one question, body cut
	resp := new(dns.Msg)
	resp.SetReply(good)
	respWire, _ := resp.Pack()
	for _, p := range [][]byte{{0xde, 0xad}, badBody, []byte(strings.Repeat("\xff", 600)), respWire, goodWire} {
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	var r dns.Msg
	if err := r.Unpack(buf[:n]); err != nil || r.Id != good.Id || len(r.Answer) != 2 {
		t.Fatalf("first packet back: id %d (want %d), %d answers, err %v", r.Id, good.Id, len(r.Answer), err)
	}
	// With one UDP worker, packets are handled in order: the drops are
	// counted before the good answer was sent.
	if got := testutil.ToFloat64(s.m.dropped.WithLabelValues(dropMalformed)); got != 3 {
		t.Errorf("dropped{malformed} = %v, want 3", got)
	}
	if got := testutil.ToFloat64(s.m.dropped.WithLabelValues(dropResponse)); got != 1 {
		t.Errorf("dropped{response} = %v, want 1", got)
	}
	t.Run("TCP: a malformed message closes the connection", func(t *testing.T) {
		conn, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.Write([]byte{0, 2, 0xde, 0xad})
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := conn.Read(buf); err == nil {
			t.Errorf("read %d bytes, want the connection closed", n)
		}
	})
}
