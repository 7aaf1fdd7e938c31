package h1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves HTTP/1.x on the connections a Listener accepts, in place
// of net/http's server: the same request parsing rules, response framing,
// timeouts and ResponseController support, with less work per request (no
// background read of every request, no header sort or clone, one string
// per request head). Connections that speak HTTP/2 (a *tls.Conn that
// negotiated h2; with H2C, a plain connection that starts with the HTTP/2
// preface) go to HTTP2.
//
// The zero value is not usable: Handler is required.
type Server struct {
	Handler http.Handler
	// The timeouts of http.Server, with its meaning: ReadHeaderTimeout
	// (0: ReadTimeout) bounds a head, ReadTimeout a request with its body,
	// WriteTimeout a response, IdleTimeout (0: ReadTimeout) the wait for
	// the next request on a keep-alive connection.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request head (plus 4 KiB, as net/http);
	// larger heads get 431. 0: http.DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// ErrorLog receives what net/http's ErrorLog would (a handler's panic
	// with its stack, a superfluous WriteHeader); nil: the log package's.
	ErrorLog *log.Logger
	// HTTP2 serves a connection that speaks HTTP/2 (it owns it from then
	// on); nil: such connections are closed.
	HTTP2 func(net.Conn)
	// H2C hands plain connections that start with the HTTP/2 preface to
	// HTTP2 (prior-knowledge h2c).
	H2C bool
	// Base is the value of http.ServerContextKey in request contexts.
	Base *http.Server

	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	conns    map[*conn]struct{}
	changed  chan struct{} // closed (and replaced) when a connection ends during Shutdown
	shutting atomic.Bool
}

// connection states that Shutdown tells apart
const (
	stActive int32 = iota
	stIdle         // waiting for a request's first bytes: Shutdown closes it
)

func (s *Server) maxHeaderBytes() int {
	if s.MaxHeaderBytes > 0 {
		return s.MaxHeaderBytes
	}
	return http.DefaultMaxHeaderBytes
}

func (s *Server) readHeaderTimeout() time.Duration {
	if s.ReadHeaderTimeout != 0 {
		return s.ReadHeaderTimeout
	}
	return s.ReadTimeout
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout != 0 {
		return s.IdleTimeout
	}
	return s.ReadTimeout
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// Serve accepts connections on ln and serves each on a goroutine of its
// own until ln fails or Shutdown or Close is called (then it returns
// http.ErrServerClosed). Temporary accept errors are retried as net/http
// does.
func (s *Server) Serve(ln net.Listener) error {
	defer ln.Close()
	s.mu.Lock()
	if s.shutting.Load() {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	if s.lns == nil {
		s.lns = map[net.Listener]struct{}{}
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
	}()
	var delay time.Duration
	for {
		rwc, err := ln.Accept()
		if err != nil {
			if s.shutting.Load() {
				return http.ErrServerClosed
			}
			// net/http's test for an accept error worth retrying (EMFILE,
			// ENFILE, ECONNABORTED...): Temporary is deprecated for callers
			// of a connection, not for an accept loop.
			//lint:ignore SA1019 net/http's accept loop uses it the same way
			if ne, ok := err.(net.Error); ok && ne.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.logf("http: Accept error: %v; retrying in %v", err, delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		go s.serveConn(rwc)
	}
}

// Shutdown stops accepting, closes idle connections (parked ones are the
// listener's, closed with it), and waits until every connection in use
// finished its response and closed, or until ctx ends. Responses written
// meanwhile say Connection: close.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutting.Store(true)
	err := s.closeListeners()
	for {
		s.mu.Lock()
		for c := range s.conns {
			if c.state.Load() == stIdle {
				_ = c.rwc.Close()
			}
		}
		n := len(s.conns)
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		if n == 0 {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// StopAccepting closes the listeners (Shutdown's first step, on its own).
func (s *Server) StopAccepting() error {
	s.shutting.Store(true)
	return s.closeListeners()
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	s.shutting.Store(true)
	err := s.closeListeners()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.rwc.Close()
	}
	s.mu.Unlock()
	return err
}

func (s *Server) closeListeners() error {
	s.mu.Lock()
	lns := make([]net.Listener, 0, len(s.lns))
	for ln := range s.lns {
		lns = append(lns, ln)
	}
	s.mu.Unlock()
	var errs []error
	for _, ln := range lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutting.Load() {
		return false
	}
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	s.mu.Unlock()
}

// keepAlives reports whether responses may keep their connection open.
func (s *Server) keepAlives() bool { return !s.shutting.Load() }

// conn is one client connection while this server serves it (a parked
// connection handed back by the listener is a new conn).
type conn struct {
	srv      *Server
	rwc      net.Conn // as the listener handed it (a framedConn, a framedTLSConn, or any net.Conn)
	cr       connReader
	br       *bufio.Reader
	bw       *bufio.Writer
	remote   string
	tls      *tls.ConnectionState
	ctx      context.Context // ServerContextKey, LocalAddrContextKey
	state    atomic.Int32
	lastPOST bool
	hijacked bool
	pre      [preSize]byte // a response's first bytes, held until the header is written
	watch    watcher

	fc        *framedConn // rwc's framedConn, nil if it has none (deferReadDeadline)
	wd        time.Time   // the write deadline serve put on rwc (setWriteTimeout)
	wdTouched atomic.Bool // a handler set a write deadline since
}

// connReader is what the buffered reader reads: the connection, after the
// byte a watch read (see watcher) may have taken.
type connReader struct {
	c       *conn
	hasByte bool
	b       [1]byte
}

func (cr *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if cr.hasByte {
		cr.hasByte = false
		p[0] = cr.b[0]
		return 1, nil
	}
	return cr.c.rwc.Read(p)
}

var (
	readerPool sync.Pool
	writerPool sync.Pool
)

const bufSize = 4 << 10

func getReader(r io.Reader) *bufio.Reader {
	if v := readerPool.Get(); v != nil {
		br := v.(*bufio.Reader)
		br.Reset(r)
		return br
	}
	return bufio.NewReaderSize(r, bufSize)
}

func getWriter(w io.Writer) *bufio.Writer {
	if v := writerPool.Get(); v != nil {
		bw := v.(*bufio.Writer)
		bw.Reset(w)
		return bw
	}
	return bufio.NewWriterSize(w, bufSize)
}

func (s *Server) serveConn(rwc net.Conn) {
	if tc, ok := rwc.(*tls.Conn); ok {
		// the listener hands over a TLS connection unframed only when it
		// negotiated h2
		if s.HTTP2 != nil {
			s.HTTP2(tc)
		} else {
			_ = tc.Close()
		}
		return
	}
	c := &conn{srv: s, rwc: rwc, fc: asFramed(rwc)}
	c.cr.c = c
	c.state.Store(stIdle)
	if !s.track(c) {
		_ = rwc.Close()
		return
	}
	c.serve()
}

type connectionStater interface {
	ConnectionState() tls.ConnectionState
}

func (c *conn) serve() {
	s := c.srv
	var inflight *response
	handedOff := false
	linger := false // the client may still be sending: lingerClose
	reset := false  // an aborted answer that only the close would end: resetClose
	defer func() {
		if err := recover(); err != nil && err != http.ErrAbortHandler {
			const size = 64 << 10
			buf := make([]byte, size)
			buf = buf[:runtime.Stack(buf, false)]
			s.logf("http: panic serving %v: %v\n%s", c.remote, err, buf)
		}
		if inflight != nil { // the handler panicked: nothing it buffered is sent
			inflight.cancel()
			inflight.disableContinue()
			if !c.hijacked {
				c.watchStop()
				linger = inflight.unfinishedBody()
				reset = inflight.closeDelimited()
			}
		}
		if !c.hijacked && !handedOff {
			c.release(inflight == nil)
			switch {
			case reset:
				resetClose(c.rwc)
			case linger:
				lingerClose(c.rwc)
			default:
				_ = c.rwc.Close()
			}
		}
		s.untrack(c)
	}()
	if ra := c.rwc.RemoteAddr(); ra != nil {
		c.remote = ra.String()
	}
	if cs, ok := c.rwc.(connectionStater); ok {
		st := cs.ConnectionState()
		c.tls = &st
	}
	c.ctx = context.WithValue(context.WithValue(context.Background(), http.ServerContextKey, s.Base), http.LocalAddrContextKey, c.rwc.LocalAddr())
	c.br = getReader(&c.cr)
	c.bw = getWriter(c.rwc)
	if d := s.readHeaderTimeout(); d > 0 {
		_ = c.rwc.SetReadDeadline(time.Now().Add(d))
	}
	if _, err := c.br.Peek(1); err != nil {
		return
	}
	if s.H2C && c.tls == nil && s.HTTP2 != nil && c.h2cPreface() {
		handedOff = true
		_ = c.rwc.SetReadDeadline(time.Time{})
		h2 := &prefaceConn{Conn: c.rwc, br: c.br}
		c.bw.Reset(nil)
		writerPool.Put(c.bw)
		c.bw = nil
		s.HTTP2(h2)
		return
	}
	t0 := time.Now()
	for {
		c.state.Store(stActive)
		w, err := c.readRequest(t0)
		if err != nil {
			linger = c.replyError(err)
			return
		}
		if w.req.Header["Expect"] != nil {
			if hasToken(w.req.Header["Expect"][:1], "100-continue") {
				if w.req.ProtoAtLeast(1, 1) && w.req.ContentLength != 0 {
					w.canWriteContinue.Store(true)
					w.expectContinue = true
				}
			} else if w.req.Header.Get("Expect") != "" {
				w.Header().Set("Connection", "close")
				w.WriteHeader(http.StatusExpectationFailed)
				w.finish()
				linger = w.unfinishedBody()
				return
			}
		}
		c.watchBegin(w.cancel)
		if w.body == nil {
			c.watchArm()
		}
		inflight = w
		h := s.Handler
		if w.req.RequestURI == "*" && w.req.Method == "OPTIONS" {
			h = globalOptions{}
		}
		h.ServeHTTP(w, w.req)
		inflight = nil
		w.cancel()
		if c.hijacked {
			return
		}
		c.watchStop()
		w.finish()
		// the write deadline stays: no write is due until the next
		// request, which sets its own (setWriteTimeout)
		if !w.reuse() {
			linger = w.werr == nil && (w.unfinishedBody() || c.br.Buffered() > 0)
			return
		}
		ConnState(c.rwc, http.StateIdle)
		c.state.Store(stIdle)
		if !s.keepAlives() {
			return
		}
		if d := s.idleTimeout(); d > 0 {
			c.deferReadDeadline(time.Now().Add(d))
		} else {
			c.deferReadDeadline(time.Time{})
		}
		if _, err := c.br.Peek(4); err != nil {
			return
		}
		t0 = time.Now()
		if d := s.readHeaderTimeout(); d > 0 {
			c.deferReadDeadline(t0.Add(d))
		} else {
			c.deferReadDeadline(time.Time{})
		}
	}
}

// deferReadDeadline sets the read deadline between requests, when no
// read is in flight: on a framedConn it is put on the connection by the
// next read (framedConn.deferReadDeadline), so that the idle, read-header
// and whole-request deadlines, which replace one another, cost one
// runtime timer update per request instead of three.
func (c *conn) deferReadDeadline(t time.Time) {
	if c.fc != nil {
		c.fc.deferReadDeadline(t)
		return
	}
	_ = c.rwc.SetReadDeadline(t)
}

// writeSlack is how much later than WriteTimeout a response's write
// deadline may fall: the deadline is set once per WriteTimeout/writeSlack
// on a busy connection instead of twice per request (set with the
// request, cleared after the answer).
const writeSlack = 8

// setWriteTimeout bounds the writing of the response to the request read
// at now: at least d, at most d + d/writeSlack. The deadline on the
// connection is kept when it is in that window (and no handler set
// another meanwhile); otherwise it becomes now + d + d/writeSlack.
func (c *conn) setWriteTimeout(now time.Time, d time.Duration) {
	touched := c.wdTouched.Swap(false)
	if d <= 0 {
		if touched || !c.wd.IsZero() {
			c.wd = time.Time{}
			_ = c.rwc.SetWriteDeadline(c.wd)
		}
		return
	}
	lo := now.Add(d)
	hi := lo.Add(d / writeSlack)
	if !touched && !c.wd.Before(lo) && !c.wd.After(hi) {
		return
	}
	c.wd = hi
	_ = c.rwc.SetWriteDeadline(hi)
}

// release returns the buffers to their pools; flush sends what the writer
// holds first (not after a panic).
func (c *conn) release(flush bool) {
	if c.br != nil {
		c.br.Reset(nil)
		readerPool.Put(c.br)
		c.br = nil
	}
	if c.bw != nil {
		if flush {
			_ = c.bw.Flush()
		}
		c.bw.Reset(nil)
		writerPool.Put(c.bw)
		c.bw = nil
	}
}

// h2cPreface reports whether the connection starts with the HTTP/2
// client preface (the listener's framer has let it through whole).
func (c *conn) h2cPreface() bool {
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	b, _ := c.br.Peek(c.br.Buffered())
	n := min(len(b), len(preface))
	if n == 0 || string(b[:n]) != preface[:n] {
		return false
	}
	if len(b) < len(preface) {
		var err error
		if b, err = c.br.Peek(len(preface)); err != nil {
			return false
		}
	}
	return string(b) == preface || bytes.HasPrefix(b, []byte(preface))
}

// prefaceConn is a connection handed to HTTP/2 with the bytes already
// buffered in front.
type prefaceConn struct {
	net.Conn
	br *bufio.Reader
}

func (p *prefaceConn) Read(b []byte) (int, error) {
	if p.br != nil {
		if p.br.Buffered() > 0 {
			return p.br.Read(b)
		}
		p.br = nil
	}
	return p.Conn.Read(b)
}

// A connection the server ends while its client may still be sending (a
// request body left unread, bytes after a request it refused) is closed
// lingering. A close with unread bytes makes the kernel answer with a
// reset: what the server had not sent yet is dropped, the client's next
// read or write fails (an answer delimited by the close ends in an error),
// and a Go client whose body is still being written fails the request
// with that write error (EPIPE or ECONNRESET) when it sees it before the
// answer it already has, which a starved client often does. So the write
// side is shut first (the answer, then a FIN), and what still comes is
// read and dropped until the client closes, bounded like nginx's lingering
// close: lingerIdle without a byte, lingerTotal in all, lingerMaxBytes
// read. net/http reads up to 256 KiB of an unread body first and, beyond
// that, waits 500 ms after the FIN without reading; so did this server
// (500 ms, 256 KiB), and hey -c 400 beside two CPU hogs lost 14 of 10 000
// POSTs of 300 KiB answered 429 early, 500 of 2 MiB (issue 32, defect 6).
// It runs on the connection's goroutine (its buffers back in their pools):
// Shutdown waits for it, Close ends it.
const (
	lingerIdle     = 2 * time.Second
	lingerTotal    = 10 * time.Second
	lingerMaxBytes = 8 << 20
)

type closeWriter interface{ CloseWrite() error }

// lingerClose shuts c's write side, drains what the client still sends
// (within the bounds above), then closes c. A framedConn is drained under
// its framer (which may have ended its stream at the refused bytes), from
// the TCP connection: under TLS, after the close_notify, the FIN.
func lingerClose(c net.Conn) {
	r := c
	if cw, ok := c.(closeWriter); ok {
		_ = cw.CloseWrite() // TCP: FIN; TLS: close_notify
	}
	if fc := asFramed(c); fc != nil {
		fc.refused.Store(false) // this is the linger its Close would do
		r = fc.tcp()
		if r != fc.Conn { // under TLS: the FIN after the close_notify
			if cw, ok := r.(closeWriter); ok {
				_ = cw.CloseWrite()
			}
		}
	}
	drain(r)
	_ = c.Close()
}

// resetClose ends c with a reset: a handler that panicked (the relay's
// http.ErrAbortHandler when its upstream body breaks) after part of an
// answer delimited by the close went out must not let the client take
// that part for the whole answer, which a FIN, or under TLS a
// close_notify, would. The TCP connection is closed with SO_LINGER 0,
// under TLS without the close_notify.
func resetClose(c net.Conn) {
	raw := c
	if fc := asFramed(c); fc != nil {
		raw = fc.tcp()
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = raw.Close()
}

// drain reads and drops what r receives until it ends, fails, or a bound
// of the lingering close is reached.
func drain(r net.Conn) {
	var buf [8 << 10]byte // io.Discard's size; the goroutine may linger for seconds
	end := time.Now().Add(lingerTotal)
	for n := 0; n < lingerMaxBytes; {
		dl := time.Now().Add(lingerIdle)
		if dl.After(end) {
			dl = end
		}
		if r.SetReadDeadline(dl) != nil {
			return
		}
		m, err := r.Read(buf[:])
		n += m
		if err != nil {
			return
		}
	}
}

const errorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// replyError answers a request that could not be read as net/http does,
// or not at all when the client went away or timed out; true: it was
// answered, and the connection closes lingering (the client may be
// sending the rest of the request: net/http closes at once, and the
// answer is lost to the reset).
func (c *conn) replyError(err error) bool {
	var se statusError
	switch {
	case err == errTooLarge:
		const publicErr = "431 Request Header Fields Too Large"
		_, _ = c.bw.WriteString("HTTP/1.1 " + publicErr + errorHeaders + publicErr)
	case err == errUnsupported:
		_, _ = fmt.Fprintf(c.bw, "HTTP/1.1 %d %s%sUnsupported transfer encoding", http.StatusNotImplemented, http.StatusText(http.StatusNotImplemented), errorHeaders)
	case isCommonNetReadError(err):
		return false
	case errors.As(err, &se):
		_, _ = fmt.Fprintf(c.bw, "HTTP/1.1 %d %s: %s%s%d %s: %s", se.code, http.StatusText(se.code), se.text, errorHeaders, se.code, http.StatusText(se.code), se.text)
	default:
		const publicErr = "400 Bad Request"
		_, _ = c.bw.WriteString("HTTP/1.1 " + publicErr + errorHeaders + publicErr)
	}
	return c.bw.Flush() == nil
}

// isCommonNetReadError: the client went away or timed out (no answer).
func isCommonNetReadError(err error) bool {
	if err == io.EOF {
		return true
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return true
	}
	if oe, ok := err.(*net.OpError); ok && oe.Op == "read" {
		return true
	}
	return false
}

// globalOptions answers "OPTIONS *" as net/http's server does.
type globalOptions struct{}

func (globalOptions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Length", "0")
	if r.ContentLength != 0 {
		mb := http.MaxBytesReader(w, r.Body, 4<<10)
		_, _ = io.Copy(io.Discard, mb)
	}
}

// readRequest reads the next request, whose first bytes came at t0, and
// builds its response.
func (c *conn) readRequest(t0 time.Time) (*response, error) {
	s := c.srv
	if c.lastPOST {
		// RFC 7230 section 3 tolerance for old buggy clients.
		peek, _ := c.br.Peek(4)
		n := 0
		for n < len(peek) && (peek[n] == '\r' || peek[n] == '\n') {
			n++
		}
		_, _ = c.br.Discard(n)
	}
	head, err := readHead(c.br, s.maxHeaderBytes()+4096)
	if err != nil {
		return nil, err
	}
	p, err := parseHead(head)
	if err != nil {
		return nil, err
	}
	hosts, haveHost := p.header["Host"]
	if len(hosts) > 1 {
		return nil, errMalformed // too many Host headers
	}
	host := p.url.Host
	if host == "" && haveHost {
		host = hosts[0]
	}
	if pr := p.header["Pragma"]; len(pr) > 0 && pr[0] == "no-cache" {
		if _, ok := p.header["Cache-Control"]; !ok {
			p.header["Cache-Control"] = []string{"no-cache"}
		}
	}
	t, err := readTransfer(&p)
	if err != nil {
		return nil, err
	}
	isH2Upgrade := p.method == "PRI" && len(p.header) == 0 && p.url.Path == "*" && p.proto == "HTTP/2.0"
	if p.major != 1 && !(p.major == 2 && p.minor == 0 && p.method == "PRI" && p.uri == "*") {
		return nil, statusError{http.StatusHTTPVersionNotSupported, "unsupported protocol version"}
	}
	c.lastPOST = p.method == "POST"
	if (p.major > 1 || p.minor >= 1) && len(hosts) == 0 && !isH2Upgrade && p.method != "CONNECT" {
		return nil, badRequest("missing required Host header")
	}
	if len(hosts) == 1 && !validHostHeader(hosts[0]) {
		return nil, badRequest("malformed Host header")
	}
	delete(p.header, "Host")
	if isH2Upgrade {
		t.length, t.close = -1, true
	}

	ctx, cancel := context.WithCancel(c.ctx)
	r0 := http.Request{
		Method: p.method, URL: p.url, Proto: p.proto, ProtoMajor: p.major, ProtoMinor: p.minor,
		Header: p.header, ContentLength: t.length, Close: t.close, Host: host, Trailer: t.trailer,
		RemoteAddr: c.remote, RequestURI: p.uri, TLS: c.tls, Body: http.NoBody,
	}
	if t.chunked {
		r0.TransferEncoding = []string{"chunked"}
	}
	req := r0.WithContext(ctx)
	var w *response
	if t.chunked || t.length > 0 {
		x := &exchange{}
		w = &x.w
		w.init(c, req, cancel)
		b := &x.b
		b.c, b.w, b.req, b.remain = c, w, req, t.length
		if t.chunked {
			b.chunked = newChunkedReader(c.br)
		}
		req.Body = b
		w.body = b
	} else {
		w = &response{}
		w.init(c, req, cancel)
	}

	var whole time.Time
	if d := s.ReadTimeout; d > 0 {
		whole = t0.Add(d)
	}
	c.deferReadDeadline(whole)
	c.setWriteTimeout(time.Now(), s.WriteTimeout)
	return w, nil
}

// exchange allocates a response and its request body together.
type exchange struct {
	w response
	b body
}

// watcher tells a request's handler that its client went away, as
// net/http's background read does, but only for a request still in flight
// watchAfter after its body ended: it then reads one byte off the
// connection on a goroutine of its own (the timer's); an end of stream or
// an error cancels the request's context, a byte is kept for the next
// request. A request answered sooner costs a timer reset and stop.
type watcher struct {
	mu      sync.Mutex
	t       *time.Timer
	cancel  context.CancelFunc // the request's; nil: none in flight
	armed   bool
	reading bool
	aborted bool
	stale   int // fired timers to ignore (stopped too late)
	done    chan struct{}
}

// watchAfter is how long a request runs before its connection is watched.
var watchAfter = 100 * time.Millisecond

// onWatchRead: tests, a watch read is about to start.
var onWatchRead func()

// watchAbort is the past deadline that ends a watch read.
var watchAbort = time.Unix(1, 0)

func (c *conn) watchBegin(cancel context.CancelFunc) {
	c.watch.mu.Lock()
	c.watch.cancel = cancel
	c.watch.mu.Unlock()
}

// watchArm starts the timer once the request's body is read.
func (c *conn) watchArm() {
	wt := &c.watch
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if wt.cancel == nil || wt.armed || wt.reading {
		return
	}
	wt.armed = true
	if wt.t == nil {
		wt.t = time.AfterFunc(watchAfter, c.watchFire)
	} else {
		wt.t.Reset(watchAfter)
	}
}

func (c *conn) watchFire() {
	wt := &c.watch
	wt.mu.Lock()
	if wt.stale > 0 {
		wt.stale--
		wt.mu.Unlock()
		return
	}
	if !wt.armed {
		wt.mu.Unlock()
		return
	}
	wt.armed, wt.reading, wt.aborted = false, true, false
	done := make(chan struct{})
	wt.done = done
	wt.mu.Unlock()
	if onWatchRead != nil {
		onWatchRead()
	}
	n, err := c.rwc.Read(c.cr.b[:])
	wt.mu.Lock()
	if n == 1 {
		c.cr.hasByte = true
	}
	if ne, ok := err.(net.Error); ok && wt.aborted && ne.Timeout() {
		// stopped by watchStop
	} else if err != nil && wt.cancel != nil {
		wt.cancel() // the client went away (or the read deadline passed, as in net/http)
	}
	wt.reading = false
	close(done)
	wt.mu.Unlock()
}

// watchStop ends the watch of the request in flight, aborting a pending
// read, before the connection is read again or hijacked.
func (c *conn) watchStop() {
	wt := &c.watch
	wt.mu.Lock()
	wt.cancel = nil
	if wt.armed {
		wt.armed = false
		if !wt.t.Stop() {
			wt.stale++
		}
	}
	if !wt.reading {
		wt.mu.Unlock()
		return
	}
	wt.aborted = true
	done := wt.done
	_ = c.rwc.SetReadDeadline(watchAbort)
	wt.mu.Unlock()
	<-done
	_ = c.rwc.SetReadDeadline(time.Time{})
}

// ConnQueue is a net.Listener whose connections are handed to it (Server's
// HTTP2 hook feeds it, an http.Server serving HTTP/2 accepts from it).
type ConnQueue struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func NewConnQueue(addr net.Addr) *ConnQueue {
	return &ConnQueue{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

// Deliver hands c to Accept, or closes it once the queue is closed.
func (q *ConnQueue) Deliver(c net.Conn) {
	select {
	case q.ch <- c:
	case <-q.done:
		_ = c.Close()
	}
}

func (q *ConnQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *ConnQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *ConnQueue) Addr() net.Addr { return q.addr }
