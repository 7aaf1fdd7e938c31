package netem

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// echo serves UDP and TCP echo on one port.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, a, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], a)
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// The proxy delays both directions (a round trip costs at least 2 × OneWay,
// the TCP dial one RTT more) and loses every datagram at Loss 1.
func TestProxyDelaysAndLoses(t *testing.T) {
	target := echo(t)
	const oneWay = 20 * time.Millisecond
	p, err := New(target, Config{OneWay: oneWay})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	u, err := net.Dial("udp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	start := time.Now()
	u.Write([]byte("ping"))
	buf := make([]byte, 16)
	u.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := u.Read(buf); err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("UDP echo: %q, %v", buf[:n], err)
	}
	if d := time.Since(start); d < 2*oneWay {
		t.Errorf("UDP round trip %v, want >= %v", d, 2*oneWay)
	}

	start = time.Now()
	c, err := p.Dial(context.Background(), "tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("pong"))
	if _, err := io.ReadFull(c, buf[:4]); err != nil || string(buf[:4]) != "pong" {
		t.Fatalf("TCP echo: %q, %v", buf[:4], err)
	}
	if d := time.Since(start); d < 4*oneWay {
		t.Errorf("TCP dial + round trip %v, want >= %v", d, 4*oneWay)
	}

	lossy, err := New(target, Config{OneWay: oneWay, Loss: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer lossy.Close()
	l, err := net.Dial("udp", lossy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Write([]byte("lost"))
	l.SetReadDeadline(time.Now().Add(10 * oneWay))
	if _, err := l.Read(buf); err == nil {
		t.Fatal("a datagram crossed a path with loss 1")
	}
}
