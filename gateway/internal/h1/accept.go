package h1

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// connListener sits between the TCP listener and net/http. It wraps each
// HTTP/1.x connection in a framedConn (request smuggling refused, see
// framing.go), terminates TLS itself when conf is set, and parks idle
// keep-alive connections.
//
// TLS: net/http serves HTTP/2, and sets Request.TLS, only on a *tls.Conn,
// so the handshake happens here, on a goroutine of its own bounded by
// timeout (never on the accepting one); a connection that negotiated h2
// is handed over as the *tls.Conn, any other as a framedTLSConn.
//
// Parking: net/http keeps a goroutine and 8 KiB of read and write buffers
// for every idle keep-alive connection. A connection idle for parkAfter is
// taken back from net/http (which ends its goroutine and pools its
// buffers); a small goroutine waits, without a buffer, until the client
// sends again (or net/http's idle deadline passes, or the listener
// closes), and Accept hands the connection to net/http once more.
type Listener struct {
	inner          net.Listener
	conf           *tls.Config // nil: plain HTTP/1.1 and h2c
	timeout        time.Duration
	maxHeaderBytes int
	onRefuse       func(net.Conn, string)
	parkAfter      time.Duration // 0: never park
	HeaderTimeout  time.Duration // net/http's read-header timeout, for heads held across its idle wait
	log            *slog.Logger

	ready   chan net.Conn
	errc    chan error
	done    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	mu      sync.Mutex
	pending map[net.Conn]struct{} // in a handshake or parked: closed by Close
	onPark  func()                // tests: a connection was parked (called under mu)
}

// parkIdleAfter is how long a keep-alive connection stays with net/http
// after a response before it is parked.
const parkIdleAfter = 250 * time.Millisecond

func NewListener(inner net.Listener, conf *tls.Config, timeout time.Duration, maxHeaderBytes int, onRefuse func(net.Conn, string), log *slog.Logger) *Listener {
	l := &Listener{inner: inner, conf: conf, timeout: timeout, maxHeaderBytes: maxHeaderBytes, onRefuse: onRefuse, log: log,
		ready: make(chan net.Conn), errc: make(chan error), done: make(chan struct{}), pending: map[net.Conn]struct{}{}}
	if parkSupported {
		l.parkAfter = parkIdleAfter
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.inner.Accept()
		if err != nil {
			select {
			case l.errc <- err: // net/http retries temporary errors
			case <-l.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if l.conf == nil {
			l.deliver(l.frame(c, c, nil))
			continue
		}
		if !l.track(c) {
			_ = c.Close()
			return
		}
		go l.handshake(c)
	}
}

// track registers c to be closed by Close; false once closed.
func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
		return false
	default:
	}
	l.pending[c] = struct{}{}
	l.wg.Add(1)
	return true
}

// untrack ends what track began: c is no longer closed by Close.
func (l *Listener) untrack(c net.Conn) {
	l.forget(c)
	l.wg.Done()
}

// forget takes c out of the connections Close closes; the caller is about
// to hand c to net/http, which owns it from then on (its Shutdown lets a
// request in flight on it finish). Forgetting only after the hand-off let
// a Close in between cut a connection net/http was already serving.
func (l *Listener) forget(c net.Conn) {
	l.mu.Lock()
	delete(l.pending, c)
	l.mu.Unlock()
}

// handOff forgets raw, then delivers c (raw itself or its wrapper), and
// ends the goroutine's tracking.
func (l *Listener) handOff(raw, c net.Conn) {
	l.forget(raw)
	l.deliver(c)
	l.wg.Done()
}

func (l *Listener) frame(c, raw net.Conn, tc *tls.Conn) net.Conn {
	fc := newFramedConn(c, l.maxHeaderBytes, l.onRefuse)
	fc.raw, fc.home = raw, l
	fc.outer = fc
	if tc != nil {
		fc.outer = framedTLSConn{fc, tc}
	}
	return fc.outer
}

// deliver hands c to Accept, or closes it once the listener is closed.
func (l *Listener) deliver(c net.Conn) {
	select {
	case l.ready <- c:
	case <-l.done:
		_ = c.Close()
	}
}

func (l *Listener) handshake(raw net.Conn) {
	tc := tls.Server(raw, l.conf)
	if l.timeout > 0 {
		_ = raw.SetDeadline(time.Now().Add(l.timeout))
	}
	if err := tc.HandshakeContext(context.Background()); err != nil {
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader[:]) {
			_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		}
		l.log.Debug("TLS handshake failed", "remote", raw.RemoteAddr().String(), "err", err)
		_ = raw.Close()
		l.untrack(raw)
		return
	}
	_ = raw.SetDeadline(time.Time{})
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		l.handOff(raw, tc)
		return
	}
	l.handOff(raw, l.frame(tc, raw, tc))
}

// park takes c back from net/http until the client sends again.
func (l *Listener) park(c *framedConn) {
	if !l.track(c.raw) {
		_ = c.Conn.Close()
		return
	}
	l.mu.Lock()
	if l.onPark != nil {
		l.onPark()
	}
	l.mu.Unlock()
	go func() {
		if err := waitReadable(c.raw, c.readDeadline()); err != nil {
			_ = c.Conn.Close() // idle deadline, client gone, or the listener closed
			l.untrack(c.raw)
			return
		}
		c.rawCleared()
		l.handOff(c.raw, c.outer)
	}()
}

func looksLikeHTTP(hdr []byte) bool {
	for _, m := range []string{"GET /", "HEAD ", "POST ", "PUT /", "OPTIO"} {
		if bytes.HasPrefix(hdr, []byte(m)) {
			return true
		}
	}
	return false
}

func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errc:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting, closes the connections in a handshake or parked,
// and waits for the listener's goroutines.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		l.mu.Lock()
		close(l.done)
		for c := range l.pending {
			_ = c.Close()
		}
		l.mu.Unlock()
		err = l.inner.Close()
		l.wg.Wait()
	})
	return err
}

func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// SetOnPark makes the listener call f (under its lock, so f must not
// block) each time it parks a connection; tests wait on it.
func (l *Listener) SetOnPark(f func()) {
	l.mu.Lock()
	l.onPark = f
	l.mu.Unlock()
}

// connState tells a framedConn when net/http waits for its next request
// and when it hijacked the connection.
func ConnState(c net.Conn, s http.ConnState) {
	fc := asFramed(c)
	if fc == nil {
		return
	}
	switch s {
	case http.StateIdle:
		fc.settle(false)
		fc.idle.Store(true)
	case http.StateHijacked:
		fc.settle(true)
	}
}

// asFramed returns the framedConn c is, or nil.
func asFramed(c net.Conn) *framedConn {
	switch t := c.(type) {
	case *framedConn:
		return t
	case framedTLSConn:
		return t.framedConn
	}
	return nil
}

// handshakeTimeout is net/http's bound for a TLS handshake: the smallest
// positive of the read-header, read and write timeouts.
func HandshakeTimeout(ds ...time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		if d > 0 && (t == 0 || d < t) {
			t = d
		}
	}
	return t
}
