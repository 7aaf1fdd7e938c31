package h1

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// refusedHead is what net/http is handed instead of a request whose
// framing is ambiguous: two different Content-Length values, which it
// answers with "400 Bad Request" and a closed connection. It comes after
// every earlier pipelined request, so their responses go out first.
const refusedHead = "GET / HTTP/1.1\r\nHost: refused\r\nContent-Length: 0\r\nContent-Length: 1\r\n\r\n"

// framedConn is a client connection whose HTTP/1.x request stream is
// checked by a framer before net/http reads it. An idle connection holds
// no buffer: bytes are held only while a head or a trailer section is
// incomplete. A read that fails with a timeout (net/http's read deadlines,
// its abortPendingRead) keeps what is held for the next one.
type framedConn struct {
	net.Conn
	f        framer
	buf      []byte // holding buffer, nil when nothing is held
	lo, hi   int    // held bytes are buf[lo:hi]
	ok       int    // of which buf[lo:lo+ok] are approved
	err      error  // returned once nothing is held any more
	refusal  string // handed to net/http after the approved bytes
	end      bool   // after the approved bytes and the refusal: io.EOF
	onRefuse func(c net.Conn, why string)
	refused  atomic.Bool // Close lingers once after a refusal

	// parking (see connListener); home is nil when the conn does not park
	home    *Listener
	raw     net.Conn     // the TCP connection (under TLS)
	outer   net.Conn     // what net/http is handed: this, or a framedTLSConn
	idle    atomic.Bool  // net/http waits for the next request (ConnState idle)
	parking atomic.Bool  // Read told net/http the connection ended: Close parks it
	rd      atomic.Int64 // the read deadline the server set, unix ns (0: none)
	armed   bool         // the partial head held has the read-header deadline

	// the read deadline on the connection itself, unix ns (0: none): the
	// server records some deadlines without setting them (deferReadDeadline)
	// and the next read puts rd on the connection (syncRD)
	dlMu    sync.Mutex
	applied int64
}

// framedTLSConn is a framedConn over TLS: net/http sets Request.TLS from
// ConnectionState for a connection that is not a *tls.Conn.
type framedTLSConn struct {
	*framedConn
	tc *tls.Conn
}

func (c framedTLSConn) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }

func newFramedConn(c net.Conn, maxHeaderBytes int, onRefuse func(net.Conn, string)) *framedConn {
	return &framedConn{Conn: c, f: newFramer(maxHeaderBytes), onRefuse: onRefuse}
}

// heldSize is the first holding buffer's size; heldPool recycles them.
const heldSize = 4096

var heldPool = sync.Pool{New: func() any { b := make([]byte, heldSize); return &b }}

func (c *framedConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(p) == 1 {
		// net/http's background read while a handler runs (or a read at
		// the end of its header limit): never the wait for a request
		c.idle.Store(false)
	}
	for {
		switch {
		case c.ok > 0:
			n := copy(p, c.buf[c.lo:c.lo+c.ok])
			c.lo += n
			c.ok -= n
			if c.lo == c.hi {
				c.release()
			}
			return n, nil
		case c.refusal != "":
			n := copy(p, c.refusal)
			c.refusal = c.refusal[n:]
			return n, nil
		case c.err != nil && c.lo == c.hi:
			return 0, c.err
		case c.end:
			return 0, io.EOF
		case c.f.st == fAwait:
			if err := c.await(); err != nil {
				return 0, err
			}
		case c.lo == c.hi:
			if c.f.open() {
				return c.connRead(p)
			}
			var n int
			var err error
			park := false
			if len(p) > 1 && c.idle.Swap(false) && c.home != nil && c.home.parkAfter > 0 && c.f.st == fHead {
				n, err, park = c.graceRead(p)
			} else {
				n, err = c.connRead(p)
			}
			if park {
				c.parking.Store(true)
				return 0, io.EOF
			}
			a := 0
			if n > 0 {
				a = c.scan(p[:n])
			}
			if err != nil && !c.timeout(err) {
				c.ok, c.err = c.hi-c.lo, err // the stream ended: deliver the rest as it is
			}
			if a > 0 {
				return a, nil
			}
			if err != nil && c.ok == 0 {
				return 0, err
			}
		default: // a section is partial: read more behind it
			if len(p) > 1 && !c.armed && c.f.st == fHead && c.home != nil && c.home.HeaderTimeout > 0 {
				c.armHeaderTimeout()
			}
			if c.lo > 0 {
				c.hi = copy(c.buf, c.buf[c.lo:c.hi])
				c.lo = 0
			}
			if c.hi == len(c.buf) {
				c.buf = append(c.buf, make([]byte, len(c.buf))...)
			}
			var n int
			var err error
			if c.armed {
				n, err = c.Conn.Read(c.buf[c.hi:]) // under the read-header deadline
			} else {
				n, err = c.connRead(c.buf[c.hi:])
			}
			c.hi += n
			if n > 0 {
				c.scanHeld()
			}
			if err != nil && c.ok == 0 {
				if c.timeout(err) {
					return 0, err // held bytes stay
				}
				c.ok, c.err = c.hi-c.lo, err
			}
		}
	}
}

// await reads what the client sends after an Upgrade or CONNECT request
// into the holding buffer and delivers none of it, until net/http either
// hijacks the connection (it then carries another protocol: open) or
// waits for the next request (framing resumes on the held bytes); both
// first abort the pending read, which returns here as a timeout. More
// than a head's worth meanwhile fails the read.
func (c *framedConn) await() error {
	if c.buf == nil {
		c.hold(nil)
	}
	if c.lo > 0 {
		c.hi = copy(c.buf, c.buf[c.lo:c.hi])
		c.lo = 0
	}
	if c.hi == len(c.buf) {
		if c.hi >= c.f.maxHead {
			c.err = errAwaitOverflow
			return c.err
		}
		c.buf = append(c.buf, make([]byte, len(c.buf))...)
	}
	n, err := c.connRead(c.buf[c.hi:])
	c.hi += n
	if err != nil && !c.timeout(err) {
		c.release() // the client is gone: nothing it sent is served
		c.err = err
	}
	return err
}

var errAwaitOverflow = errors.New("gateway: too many bytes before the upgrade was answered")

// settle ends fAwait (on net/http's goroutine, after it aborted the
// pending read): hijacked, everything after is another protocol;
// otherwise the held bytes start the next request.
func (c *framedConn) settle(hijacked bool) {
	switch {
	case hijacked:
		c.f.st = fOpen
		c.ok = c.hi - c.lo
	case c.f.st == fAwait:
		c.f.st, c.f.sec = fHead, 0
		if c.lo < c.hi {
			c.scanHeld()
		}
	}
}

// armHeaderTimeout bounds the wait for the rest of a head whose first
// bytes came while net/http waited for a request on a keep-alive
// connection: net/http applies its read-header timeout once Peek returns,
// but the framer holds the head back until it is complete, so without
// this the head could take until the idle deadline. net/http sets its own
// deadlines again once it has the head.
func (c *framedConn) armHeaderTimeout() {
	c.armed = true
	dl := time.Now().Add(c.home.HeaderTimeout)
	if rd := c.readDeadline(); !rd.IsZero() && !dl.Before(rd) {
		dl = rd
	}
	c.putRD(dl)
}

// graceRead is the read while net/http waits for the next request on a
// keep-alive connection: it waits up to parkAfter; park is true if
// nothing came (the caller then ends the stream for net/http, and Close
// parks the connection). A timeout leaves the connection intact (also
// under TLS).
//
// The recorded deadline is not put back after the read: the next read
// does that (syncRD), and the next request's deadlines usually replace
// it before then.
func (c *framedConn) graceRead(p []byte) (n int, err error, park bool) {
	dl := c.readDeadline()
	grace := time.Now().Add(c.home.parkAfter)
	if !dl.IsZero() && dl.Before(grace) {
		n, err = c.connRead(p)
		return n, err, false
	}
	c.putRD(grace)
	n, err = c.Conn.Read(p)
	if n == 0 && err != nil && c.timeout(err) {
		return 0, nil, true
	}
	return n, err, false
}

// tcp is the connection beneath the framer and any TLS: raw when the
// listener set it, else the framed connection itself.
func (c *framedConn) tcp() net.Conn {
	if c.raw != nil {
		return c.raw
	}
	return c.Conn
}

// SetReadDeadline records the deadline the server sets (the idle timeout
// carries over to a parked connection) and puts it on the connection.
func (c *framedConn) SetReadDeadline(t time.Time) error {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	c.setRD(t)
	c.applied = c.rd.Load()
	return c.Conn.SetReadDeadline(t)
}

func (c *framedConn) SetDeadline(t time.Time) error {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	c.setRD(t)
	c.applied = c.rd.Load()
	return c.Conn.SetDeadline(t)
}

// deferReadDeadline records t as the read deadline without putting it on
// the connection: the next read does (syncRD). The server uses it between
// requests, when no read is in flight, where it would otherwise set a
// deadline and replace it again before any read (idle, read-header and
// whole-request deadlines, one after the other): a deadline costs a
// runtime timer update and its lock.
func (c *framedConn) deferReadDeadline(t time.Time) {
	c.dlMu.Lock()
	c.setRD(t)
	c.dlMu.Unlock()
}

// syncRD puts the recorded read deadline on the connection unless it is
// there.
func (c *framedConn) syncRD() {
	c.dlMu.Lock()
	if rd := c.rd.Load(); rd != c.applied {
		c.applied = rd
		_ = c.Conn.SetReadDeadline(nsTime(rd))
	}
	c.dlMu.Unlock()
}

// putRD puts t on the connection for the next read without recording it
// as the server's deadline (the grace read's, the partial head's).
func (c *framedConn) putRD(t time.Time) {
	c.dlMu.Lock()
	c.applied = unixNano(t)
	_ = c.Conn.SetReadDeadline(t)
	c.dlMu.Unlock()
}

// connRead reads from the connection with the recorded deadline on it.
func (c *framedConn) connRead(p []byte) (int, error) {
	c.syncRD()
	return c.Conn.Read(p)
}

// rawCleared notes that the raw connection's read deadline was cleared
// beneath the framedConn (waitReadable, when a parked connection wakes).
func (c *framedConn) rawCleared() {
	c.dlMu.Lock()
	c.applied = 0
	c.dlMu.Unlock()
}

func (c *framedConn) setRD(t time.Time) { c.rd.Store(unixNano(t)) }

func (c *framedConn) readDeadline() time.Time { return nsTime(c.rd.Load()) }

// unixNano is t in unix ns, 0 for the zero time (no deadline); nsTime is
// its inverse.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func nsTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// timeout reports a deadline error as net/http tests it (a type
// assertion: errors.As costs microseconds on this path, taken by every
// aborted background read).
func (c *framedConn) timeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// scan runs the framer over b, freshly read into the caller's buffer, and
// returns how many bytes at its start are approved; a partial section at
// its end is copied into the holding buffer.
func (c *framedConn) scan(b []byte) int {
	n, r := c.f.advance(b)
	switch r {
	case fHold:
		c.hold(b[n:])
	case fRefuse:
		c.refuse()
	case fMalformed:
		c.end = true
	}
	return n
}

// scanHeld runs the framer over the held bytes, which start a section.
func (c *framedConn) scanHeld() {
	n, r := c.f.advance(c.buf[c.lo:c.hi])
	c.ok = n
	if n > 0 {
		c.armed = false // the head is complete; what follows is a new section
	}
	switch r {
	case fOK, fMalformed:
		c.ok = c.hi - c.lo
		c.end = r == fMalformed
	case fRefuse:
		c.hi = c.lo + n
		if n == 0 {
			c.release()
		}
		c.refuse()
	}
}

func (c *framedConn) hold(b []byte) {
	c.armed = false
	if len(b) <= heldSize {
		c.buf = *heldPool.Get().(*[]byte)
	} else {
		c.buf = make([]byte, 2*len(b))
	}
	c.lo, c.hi, c.ok = 0, copy(c.buf, b), 0
}

func (c *framedConn) refuse() {
	c.refusal, c.end = refusedHead, true
	c.refused.Store(true)
	if c.onRefuse != nil {
		c.onRefuse(c, c.f.why)
	}
}

func (c *framedConn) release() {
	if len(c.buf) == heldSize {
		b := c.buf
		heldPool.Put(&b)
	}
	c.buf, c.lo, c.hi, c.ok, c.armed = nil, 0, 0, 0, false
}

// CloseWrite keeps net/http's closeWriteAndWait working through the
// wrapper.
func (c *framedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close closes the connection. After a refusal, the client may still be
// sending what followed the refused head; closing with unread bytes makes
// the kernel send a reset that can destroy the 400 in flight, so the
// connection closes lingering (lingerClose, on a goroutine of its own).
// Server answers the refusal and lingers itself; this is for any other
// user of the connection.
func (c *framedConn) Close() error {
	if c.parking.CompareAndSwap(true, false) {
		c.home.park(c)
		return nil
	}
	if !c.refused.CompareAndSwap(true, false) {
		return c.Conn.Close()
	}
	go lingerClose(c.outerConn())
	return nil
}

// outerConn is the connection as the listener hands it out.
func (c *framedConn) outerConn() net.Conn {
	if c.outer != nil {
		return c.outer
	}
	return c
}
