package listenpair

import (
	"net"
	"testing"
)

// TestSkipsAPortWhoseUDPIsTaken: with port 0, a TCP port whose UDP twin is
// held elsewhere is given back and another tried; a fixed port held over
// UDP is an error and leaves no TCP listener behind.
func TestSkipsAPortWhoseUDPIsTaken(t *testing.T) {
	// Hold many UDP ports so that the kernel's TCP choices meet some.
	var held []net.PacketConn
	for range 200 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, pc)
	}
	defer func() {
		for _, pc := range held {
			pc.Close()
		}
	}()
	for range 50 {
		ln, pc, err := Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if ln.Addr().(*net.TCPAddr).Port != pc.LocalAddr().(*net.UDPAddr).Port {
			t.Fatalf("TCP %v, UDP %v", ln.Addr(), pc.LocalAddr())
		}
		ln.Close()
		pc.Close()
	}
	// A held UDP port whose TCP twin is free (other processes hold TCP
	// ports too: CI once met one): Listen must fail and give TCP back.
	for _, pc := range held {
		taken := pc.LocalAddr().String()
		probe, err := net.Listen("tcp", taken)
		if err != nil {
			continue // TCP held elsewhere: not a question Listen can answer
		}
		probe.Close()
		if _, _, err := Listen(taken); err == nil {
			t.Fatalf("%s: UDP is taken, want an error", taken)
		}
		ln, err := net.Listen("tcp", taken) // nothing left bound to it
		if err != nil {
			t.Fatalf("TCP %s still held after the failed Listen: %v", taken, err)
		}
		ln.Close()
		return
	}
	t.Fatal("every held UDP port's TCP twin is taken elsewhere")
}
