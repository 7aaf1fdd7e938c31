// Package listenpair opens a TCP listener and a UDP socket on the same
// address, for servers that speak TCP (TLS, HTTP/1.1, HTTP/2, DNS over TCP)
// and UDP (HTTP/3, DNS) on one port.
//
// Contract: with a fixed port both are bound to it, or neither (an error).
// With port 0 the TCP port is the kernel's choice and UDP takes the same
// number; when another socket already holds that UDP port, both are
// released and another port is tried (up to 50 times): binding UDP to
// whatever TCP got, once, failed under load when many processes hold UDP
// ports (control's listener did, in make test beside other jobs).
package listenpair

import (
	"fmt"
	"net"
)

// tries bounds the attempts with port 0.
const tries = 50

// Listen binds TCP and UDP on addr (host:port; port 0: any, the same for
// both).
func Listen(addr string) (net.Listener, net.PacketConn, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	n := 1
	if port == "0" || port == "" {
		n = tries
	}
	var last error
	for range n {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, err
		}
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		if err == nil {
			return ln, pc, nil
		}
		ln.Close()
		last = err
	}
	return nil, nil, fmt.Errorf("listenpair: no port free for both TCP and UDP on %s after %d tries: %w", addr, n, last)
}
