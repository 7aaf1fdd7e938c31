//go:build unix

package h1

import "syscall"

// alive reports whether an idle connection is still open: no end of
// stream and no stray bytes waiting (a peek that does not block). An idle
// connection the backend closed would otherwise fail the next request.
// A peek that found nothing waiting marks the connection quiet for the
// exchange that follows (see flush).
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
		// bound once per connection: no allocation per check or flush
		p := &peeker{rc: rc, flushBuf: pc.bw.Flush}
		p.fn = p.peek
		p.waitFn = p.flushWait
		pc.peek = p
	}
	p := pc.peek
	p.alive, p.quiet = false, false
	if err := p.rc.Read(p.fn); err != nil {
		return false // the peek did not run (closed, or a deadline passed)
	}
	p.quiet = p.alive
	return p.alive
}

// peeker peeks at one connection without blocking, and flushes a request
// on it and waits for its answer in one raw read (flush).
type peeker struct {
	rc    syscall.RawConn
	fn    func(fd uintptr) bool
	alive bool
	b     [1]byte
	// quiet: the last peek found the receive queue empty (EAGAIN); only
	// the exchange that follows it uses (and clears) it
	quiet bool
	// flushWait's state: flushBuf is the connection's bw.Flush
	waitFn   func(fd uintptr) bool
	flushBuf func() error
	flushed  bool
	flushErr error
}

// peek: EAGAIN means nothing to read, the connection is open; 0 bytes (end
// of stream), stray bytes or an error mean it is not.
func (p *peeker) peek(fd uintptr) bool {
	_, _, err := syscall.Recvfrom(int(fd), p.b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	p.alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
	return true
}

// flush writes the buffered request (pc.bw.Flush) and, when it may, waits
// for the answer to become readable without the read that would find
// nothing: Go's read tries the system call first and waits for the poller
// only after it returned EAGAIN, and right after a request is written the
// answer is not there yet, so that read is wasted.
//
// The wait is a raw read (syscall.RawConn.Read) whose function writes the
// request on its first call and reports "not readable", so the goroutine
// parks in the poller; its next call reports readable and returns, and the
// read that follows (br, countingConn.Read) finds the answer. The order is
// what makes it safe: RawConn.Read clears the poll descriptor's readiness
// first (pollReset), and the poller is edge-triggered, so readiness that
// arrived before that would be lost; but the answer cannot arrive before
// its request, which is written after it. Skipping the read after a plain
// write (the request written first, the raw read after) would be wrong:
// an answer that came in between would have its edge cleared, and the
// exchange would hang until its deadline.
//
// It runs only on a quiet connection (the peek just found its queue empty,
// on the same descriptor that is read), when nothing of this request was
// written yet (a request larger than bw's buffer is partly written while
// it is buffered: its answer may come before the raw read), and when late
// (the connection's deadline is the early one, LateCancel away). What the
// peek cannot rule out is the backend closing (or sending stray bytes)
// between the peek and the raw read, with no reset after the request: the
// wait then ends at the early deadline, and the read after arm sees the
// end of stream; late bounds that delay to LateCancel.
//
// The wait's errors are dropped: a deadline that passed, a cancellation
// (a deadline in the past) or a closed connection fail the read that
// follows at once, with net.Conn.Read's errors, which countingConn.Read
// hands to arm as before. A request the raw read did not write (it failed
// before calling its function) is flushed the ordinary way.
func (pc *h1Conn) flush(late, unwritten bool) error {
	p := pc.peek
	if p == nil || !p.quiet || !late || !unwritten {
		return pc.bw.Flush()
	}
	p.quiet, p.flushed, p.flushErr = false, false, nil
	_ = p.rc.Read(p.waitFn)
	if !p.flushed {
		return pc.bw.Flush()
	}
	err := p.flushErr
	p.flushErr = nil
	return err
}

// flushWait is flush's raw read function: the first call writes the
// request and asks to wait (unless the write failed), the next one
// returns, woken by the poller: the answer (or an end of stream, an error)
// is readable.
func (p *peeker) flushWait(uintptr) bool {
	if p.flushed {
		return true
	}
	p.flushed = true
	p.flushErr = p.flushBuf()
	return p.flushErr != nil
}
