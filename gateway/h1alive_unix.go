//go:build unix

package gateway

import "syscall"

// alive reports whether an idle connection is still open: no end of
// stream and no stray bytes waiting (a peek that does not block). An idle
// connection the backend closed would otherwise fail the next request.
func (pc *h1Conn) alive() bool {
	if pc.br.Buffered() > 0 {
		return false
	}
	sc, ok := pc.c.Conn.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	alive := true
	var b [1]byte
	_ = rc.Read(func(fd uintptr) bool {
		// EAGAIN: nothing to read, the connection is open; 0 bytes
		// (end of stream), stray bytes or an error: it is not.
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	})
	return alive
}
