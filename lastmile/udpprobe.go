package lastmile

import (
	"context"
	"errors"
	"net"
	"syscall"
)

// probeUDP detects a closed UDP port at addr while a QUIC handshake runs:
// quic-go's socket is not connected, so the kernel does not report the ICMP
// port-unreachable an origin without QUIC answers with (Debian's nginx and
// HAProxy listen on TCP only). The probe sends one byte (a QUIC server drops
// a datagram that short) on a connected UDP socket, where that ICMP error
// surfaces as ECONNREFUSED, and calls refused with it. stop closes the
// socket and waits for the probe.
func probeUDP(ctx context.Context, addr string, refused func(error)) (stop func()) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := c.Write([]byte{0}); err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				refused(err)
			}
			return
		}
		buf := make([]byte, 64)
		for {
			_, err := c.Read(buf)
			if err == nil {
				continue // something answers on that port: not refused
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				refused(err)
			}
			return
		}
	}()
	unhook := context.AfterFunc(ctx, func() { c.Close() })
	return func() {
		unhook()
		c.Close()
		<-done
	}
}
