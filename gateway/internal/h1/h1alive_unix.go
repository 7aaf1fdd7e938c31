//go:build unix

package h1

import "syscall"

// alive reports whether an idle connection is still open: no end of
// stream and no stray bytes waiting (a peek that does not block). An idle
// connection the backend closed would otherwise fail the next request.
func (pc *h1Conn) alive() bool {
	if pc.br.Buffered() > 0 {
		return false
	}
	if pc.peek == nil {
		sc, ok := pc.c.Conn.(syscall.Conn)
		if !ok {
			return true
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return true
		}
		p := &peeker{rc: rc}
		p.fn = p.peek // bound once per connection: no allocation per check
		pc.peek = p
	}
	p := pc.peek
	p.alive = false
	if err := p.rc.Read(p.fn); err != nil {
		return false // the peek did not run (closed, or a deadline passed)
	}
	return p.alive
}

// peeker peeks at one connection without blocking.
type peeker struct {
	rc    syscall.RawConn
	fn    func(fd uintptr) bool
	alive bool
	b     [1]byte
}

// peek: EAGAIN means nothing to read, the connection is open; 0 bytes (end
// of stream), stray bytes or an error mean it is not.
func (p *peeker) peek(fd uintptr) bool {
	_, _, err := syscall.Recvfrom(int(fd), p.b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	p.alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
	return true
}
