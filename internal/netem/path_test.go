package netem

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A Path starts one relay per target on first use, reuses it, reaches the
// target through it over TCP and UDP, and after Close refuses to dial.
func TestPathOneRelayPerTarget(t *testing.T) {
	a, b := echo(t), echo(t)
	p := NewPath(Config{})
	viaA, err := p.Via(a)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := p.Via(a); again != viaA {
		t.Fatalf("second Via(a) = %s, want the same relay %s", again, viaA)
	}
	if viaB, _ := p.Via(b); viaB == viaA {
		t.Fatal("two targets share a relay")
	}
	c, err := p.Dial(context.Background(), "tcp", a)
	if err != nil {
		t.Fatal(err)
	}
	if c.RemoteAddr().String() != viaA {
		t.Fatalf("dialled %s, want the relay %s", c.RemoteAddr(), viaA)
	}
	buf := make([]byte, 4)
	c.Write([]byte("ping"))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("TCP through the path: %q, %v", buf, err)
	}
	c.Close()
	u, err := net.Dial("udp", viaA)
	if err != nil {
		t.Fatal(err)
	}
	u.SetReadDeadline(time.Now().Add(5 * time.Second))
	u.Write([]byte("pong"))
	if n, err := u.Read(buf); err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("UDP through the path: %q, %v", buf[:n], err)
	}
	u.Close()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Dial(context.Background(), "tcp", a); !errors.Is(err, ErrClosed) {
		t.Fatalf("Dial after Close: %v, want ErrClosed", err)
	}
}

// A relayed connection that both sides closed is forgotten.
func TestProxyForgetsClosedConnections(t *testing.T) {
	p, err := New(echo(t), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for range 5 {
		c, err := p.Dial(context.Background(), "tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("x"))
		buf := make([]byte, 1)
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	// the relay forgets each pair once both directions have ended
	for i := range 5 {
		select {
		case <-p.forgot:
		case <-time.After(10 * time.Second):
			t.Fatalf("pair %d still held 10 s after its client closed (%d open)", i, p.open())
		}
	}
	if n := p.open(); n != 0 {
		t.Fatalf("%d relayed connections still held", n)
	}
}

// A UDP flow (one client source port, as a DNS client uses per query) is
// closed after FlowIdle without traffic; a later datagram from the same
// address opens a new one.
func TestProxyClosesIdleUDPFlows(t *testing.T) {
	p, err := New(echo(t), Config{FlowIdle: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	u, err := net.Dial("udp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	buf := make([]byte, 8)
	for round := range 2 {
		u.SetReadDeadline(time.Now().Add(5 * time.Second))
		u.Write([]byte("ping"))
		if n, err := u.Read(buf); err != nil || string(buf[:n]) != "ping" {
			t.Fatalf("round %d: %q, %v", round, buf[:n], err)
		}
		select {
		case <-p.idled:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: idle flow not closed", round)
		}
		p.mu.Lock()
		n := len(p.flows)
		p.mu.Unlock()
		if n != 0 {
			t.Fatalf("round %d: %d flows held after idling", round, n)
		}
	}
}
