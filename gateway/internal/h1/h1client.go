package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// h1Client is the gateway's own HTTP/1.1 upstream client for plain-HTTP
// clusters. The request's goroutine writes the request and reads the
// response on a pooled keep-alive connection itself: no read-loop and
// write-loop goroutines per connection and no channel hand-offs per
// request, which is what http.Transport costs on a proxy's hot path.
//
// Framing is net/http's: the request is written by writeRequest
// (writereq.go) with (*http.Request).Write's framing (Content-Length,
// chunked with trailers, Connection: close) but without its formatting and
// sorting, and refused (ErrInvalidRequest) where net/http would repair a
// field; the response is parsed by http.ReadResponse (Content-Length,
// chunked and trailers, no body for HEAD/204/304, close-delimited bodies),
// the functions http.Transport frames with too, except the common answer
// (one Content-Length, nothing else that frames), which fastResponse
// (readresp.go) reads as http.ReadResponse would, with fewer allocations. What this type adds is the
// connection's life: a connection goes back to the pool only after its
// response body was read to its end and neither side asked to close; a body
// closed early closes its connection; an idle connection is peeked before
// reuse (alive). Interim 1xx responses other than 101 are skipped; a
// response head is bounded to maxResponseHead.
//
// Failure mode: a cancelled context or an attempt deadline
// (roundTripUntil) sets the connection's deadline, which ends a blocked
// write or read at once; the connection is then closed, never pooled. The
// cancellation is armed late (LateCancel: most exchanges end sooner and
// pay for none); before, a cancelled exchange ends when the early
// deadline passes, at most LateCancel after its start.
//
// Anything else goes to fallback (an http.Transport): Upgrade requests
// (WebSocket), CONNECT, Expect: 100-continue, non-"http" schemes, and
// request bodies that are streamed or larger than maxOwnBody.
//
// A request that failed on a reused connection before any byte of the
// response arrived is sent once more on a new connection when that is safe
// (nothing written, or an idempotent method, and a body that can be
// rewound), as http.Transport does: an idle connection the backend closed
// is not the backend's failure. An error after which no byte of the request
// reached the connection wraps errUnwritten.
type Client struct {
	fallback    *http.Transport
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle     int
	idleTimeout time.Duration

	pools sync.Map // backend address → *h1Pool
	// closeIdle: CloseIdleConnections was called and no connection was
	// dialled since; connections that come back then are closed, not
	// pooled (as http.Transport does), so a transport a reload or a
	// shutdown retired does not keep the connections in flight open.
	closeIdle atomic.Bool
	closed    atomic.Bool // close: never pool again
}

// h1Pool holds the idle connections to one backend, most recently used
// last.
type h1Pool struct {
	mu   sync.Mutex
	idle []*h1Conn
}

// h1Conn is one upstream connection with its buffers.
type h1Conn struct {
	c        *countingConn
	br       *bufio.Reader
	bw       *bufio.Writer
	t        *Client
	pool     *h1Pool
	idleAt   time.Time
	reused   bool
	canceled atomic.Bool // a cancellation forced a deadline: never pooled
	peek     *peeker     // see alive; made on first use
	// dl is the deadline set on the connection (zero: none); an exchange
	// whose answer was read whole with its head leaves its deadline set
	// (roundTrip), the next one replaces it before the connection is read
	dl       time.Time
	onCancel func() // cancel, bound once: context.AfterFunc's callback
	// the exchange in flight's cancellation (see roundTrip): stop ends the
	// armed one (nil: none armed); lateCtx and lateDL are the context and
	// the deadline of an exchange whose cancellation is not armed yet
	stop    func() bool
	lateCtx context.Context
	lateDL  time.Time
}

// errUnwritten marks an attempt that failed before any byte of the request
// was written to the connection: retrying it is safe for any method.
var ErrUnwritten = errors.New("gateway: request not written upstream")

type unwrittenError struct{ err error }

func (e *unwrittenError) Error() string   { return e.err.Error() }
func (e *unwrittenError) Unwrap() []error { return []error{e.err, ErrUnwritten} }

// errBodyClosed is returned by a response body read after Close.
var ErrBodyClosed = errors.New("gateway: read on closed response body")

func NewClient(fallback *http.Transport, dial func(ctx context.Context, network, addr string) (net.Conn, error), maxIdle int) *Client {
	return &Client{fallback: fallback, dial: dial, maxIdle: maxIdle, idleTimeout: fallback.IdleConnTimeout}
}

// maxOwnBody is the largest request body the client sends itself. It
// writes the whole request before it reads the answer, so a body must fit
// in the connection's buffers even when the backend answers early (a 413)
// without reading it; larger and streamed bodies go to http.Transport,
// which reads while it writes. A body with ContentLength 0 is of unknown
// length, as for http.Transport.
const maxOwnBody = 16 << 10

// handles reports whether the client takes req itself.
func (t *Client) Handles(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && (req.ContentLength <= 0 || req.ContentLength > maxOwnBody) {
		return false
	}
	return req.URL.Scheme == "http" && req.Method != http.MethodConnect &&
		headerEmpty(req.Header, "Upgrade") && headerEmpty(req.Header, "Expect")
}

// headerEmpty reports whether h.Get(k) is "" for a canonical k.
func headerEmpty(h http.Header, k string) bool {
	v := h[k]
	return len(v) == 0 || v[0] == ""
}

// Fallback is the http.Transport the client hands what it does not
// handle to.
func (t *Client) Fallback() *http.Transport { return t.fallback }

// RoundTrip implements http.RoundTripper.
func (t *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.Handles(req) {
		return t.fallback.RoundTrip(req)
	}
	return t.RoundTripUntil(req, nil, time.Time{})
}

// errTryTimeout: the attempt's deadline passed before the response head
// arrived.
var ErrTryTimeout = errors.New("gateway: attempt timed out")

// roundTripUntil sends req, which the client handles, and waits for the
// response head until deadline (none when zero): the deadline is the
// connection's, so a per-attempt timeout costs no timer and no derived
// context. An attempt that ran out of time fails with an error that is
// errTryTimeout. The body that follows has no deadline; cancelling req's
// context ends it.
func (t *Client) RoundTripUntil(req *http.Request, extra []Field, deadline time.Time) (*http.Response, error) {
	return t.RoundTripAt(req, extra, time.Now(), deadline)
}

// RoundTripAt is RoundTripUntil for a caller that read the time already:
// now is the attempt's start (the deadline is usually reckoned from it),
// from which LateCancel and the idle connections' age are counted.
func (t *Client) RoundTripAt(req *http.Request, extra []Field, now, deadline time.Time) (*http.Response, error) {
	pool := t.pool(req.URL.Host)
	dl, late := deadline, false // the connection's deadline; late: see roundTrip
	if deadline.IsZero() || deadline.Sub(now) > LateCancel {
		dl, late = now.Add(LateCancel), true
	}
	for try := 0; ; try++ {
		pc, err := t.conn(req, pool, try > 0, now, deadline, dl)
		if err != nil {
			return nil, err
		}
		resp, again, err := pc.roundTrip(req, extra, deadline, dl, late)
		if err == nil {
			return resp, nil
		}
		if try == 0 && again && pc.reused && req.Context().Err() == nil && !errors.Is(err, ErrTryTimeout) && rewind(req) == nil {
			continue // an idle connection the backend had closed: once more on a new one
		}
		return nil, err
	}
}

// rewind makes req's body readable again for a second write.
func rewind(req *http.Request) error {
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	if req.GetBody == nil {
		return errors.New("gateway: body cannot be rewound")
	}
	b, err := req.GetBody()
	if err != nil {
		return err
	}
	req.Body = b
	return nil
}

func (t *Client) pool(addr string) *h1Pool {
	if p, ok := t.pools.Load(addr); ok {
		return p.(*h1Pool)
	}
	p, _ := t.pools.LoadOrStore(addr, &h1Pool{})
	return p.(*h1Pool)
}

// conn returns an idle connection for req, or dials one (always, when
// fresh). An idle connection is checked before use (one non-blocking peek,
// a system call): one the backend closed would fail a request that cannot
// be resent, and bytes a backend sent after its last answer (which
// http.Transport's read loop catches while the connection idles) would be
// read as the next request's answer.
func (t *Client) conn(req *http.Request, p *h1Pool, fresh bool, now, deadline, dl time.Time) (*h1Conn, error) {
	if !fresh {
		if pc := p.get(now, t.idleTimeout, dl); pc != nil {
			return pc, nil
		}
	}
	ctx := req.Context()
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	t.closeIdle.Store(false)
	c, err := t.dial(ctx, "tcp", req.URL.Host)
	if err != nil {
		return nil, err
	}
	cc := &countingConn{Conn: c, readLeft: -1}
	return &h1Conn{c: cc, br: bufio.NewReaderSize(cc, 4<<10), bw: bufio.NewWriterSize(cc, 4<<10), t: t, pool: p}, nil
}

// get pops the most recently used idle connection, closing those idle for
// longer than idleTimeout and those not alive; the one it returns has
// deadline set.
func (p *h1Pool) get(now time.Time, idleTimeout time.Duration, deadline time.Time) *h1Conn {
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			return nil
		}
		pc := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if idleTimeout > 0 && now.Sub(pc.idleAt) > idleTimeout {
			_ = pc.c.Close()
			continue
		}
		// the deadline first: one left from the last exchange may have
		// passed, and a read (the peek too) fails at once past it
		pc.setDeadline(deadline)
		if !pc.alive() {
			_ = pc.c.Close()
			continue
		}
		pc.reused = true
		return pc
	}
}

// put returns pc to its pool, or closes it when the pool is full or the
// client retired (closeIdle, closed).
func (t *Client) put(pc *h1Conn) {
	p := pc.pool
	p.mu.Lock()
	if t.closed.Load() || t.closeIdle.Load() || len(p.idle) >= t.maxIdle {
		p.mu.Unlock()
		_ = pc.c.Close()
		return
	}
	pc.idleAt = time.Now()
	p.idle = append(p.idle, pc)
	p.mu.Unlock()
}

// CloseIdleConnections closes every idle connection, and those in flight
// when they come back unless a connection is dialled meanwhile; the
// fallback's too.
func (t *Client) CloseIdleConnections() {
	t.closeIdle.Store(true)
	t.pools.Range(func(_, v any) bool {
		p := v.(*h1Pool)
		p.mu.Lock()
		idle := p.idle
		p.idle = nil
		p.mu.Unlock()
		for _, pc := range idle {
			_ = pc.c.Close()
		}
		return true
	})
	t.fallback.CloseIdleConnections()
}

// close stops pooling and closes the idle connections.
func (t *Client) Close() {
	t.closed.Store(true)
	t.CloseIdleConnections()
}

// aLongTimeAgo is a deadline in the past: it makes blocked reads and
// writes return at once.
var aLongTimeAgo = time.Unix(1, 0)

// LateCancel is how long an exchange runs before its request's
// cancellation is armed (context.AfterFunc, its allocations and locks):
// most answers come sooner, and then none is. Until then a cancellation
// is seen when the connection's deadline, LateCancel after the start,
// passes: it ends the exchange at most LateCancel late (an HTTP/1 client
// that went away is not seen sooner than that by the server either).
var LateCancel = 100 * time.Millisecond

// roundTrip writes req and reads the response head on pc. The body is
// streamed by the returned response; pc is pooled or closed when it ends.
// again reports a failure before any byte of the response arrived after
// which req may be sent once more on another connection: nothing was
// written, or req is replayable.
//
// The connection's deadline is dl: the attempt's own deadline, or when
// that is later than LateCancel from the start (late), one LateCancel from
// the start, at which the exchange's cancellation is armed (arm) if it is
// still waiting; an answer whose body needs the connection arms it too.
func (pc *h1Conn) roundTrip(req *http.Request, extra []Field, deadline, dl time.Time, late bool) (resp *http.Response, again bool, err error) {
	ctx := req.Context()
	pc.setDeadline(dl) // a pooled connection has it already (get)
	if pc.onCancel == nil {
		pc.onCancel = pc.cancel
	}
	pc.stop = nil
	if late {
		pc.lateCtx, pc.lateDL, pc.c.late = ctx, deadline, pc
	}
	defer func() { pc.lateCtx, pc.c.late = nil, nil }()
	fail := func(again bool, err error) (*http.Response, bool, error) {
		if pc.stop != nil {
			pc.stop()
		}
		_ = pc.c.Close()
		switch {
		case ctx.Err() != nil:
			err = errors.Join(ctx.Err(), err)
		case !deadline.IsZero() && errors.Is(err, os.ErrDeadlineExceeded):
			err = errors.Join(ErrTryTimeout, err)
		}
		return nil, again, err
	}
	written := pc.c.written.Load()
	err = writeRequestWith(pc.bw, req, extra)
	if err == nil {
		// flush may also wait for the answer (h1alive_unix.go)
		err = pc.flush(late, pc.c.written.Load() == written)
	}
	if err != nil {
		if errors.Is(err, ErrInvalidRequest) {
			return fail(false, err) // the same on any connection: not sent again
		}
		if pc.c.written.Load() == written {
			return fail(true, &unwrittenError{err})
		}
		return fail(false, err)
	}
	pc.c.readLeft = MaxResponseHead
	defer func() { pc.c.readLeft = -1 }()
	for {
		if _, err := pc.br.Peek(1); err != nil {
			return fail(replayable(req), err)
		}
		var resp *http.Response
		own := fastResponse(pc.br, req) // readresp.go; nil: not the common kind
		if own != nil {
			resp = &own.resp
		} else if resp, err = http.ReadResponse(pc.br, req); err != nil {
			return fail(false, err)
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			_ = resp.Body.Close()
			continue // interim response: the final one follows
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Close = true // not ours to relay: the connection is not reused
		}
		pc.c.late = nil
		if resp.Body != http.NoBody && (own == nil || int64(pc.br.Buffered()) < own.resp.ContentLength) {
			// the head is in: the body has no deadline, unless a
			// cancellation set one meanwhile (it stores canceled first),
			// and the body's reads end when the request is cancelled. A
			// body already in the buffer whole is read without the
			// connection: the deadline stays until the next exchange
			// replaces it (get, setDeadline), and no cancellation is armed.
			pc.setDeadline(time.Time{})
			if pc.stop == nil {
				pc.stop = context.AfterFunc(ctx, pc.onCancel)
			}
			if pc.canceled.Load() {
				_ = pc.c.SetDeadline(aLongTimeAgo)
			}
		}
		keep := !resp.Close && !req.Close
		if resp.Body == http.NoBody {
			pc.done(pc.stop, keep)
			return resp, false, nil
		}
		b := &h1Body{}
		if own != nil {
			b = &own.h1 // allocated with the response
		}
		b.rc, b.pc, b.stop, b.keep = resp.Body, pc, pc.stop, keep
		resp.Body = b
		return resp, false, nil
	}
}

// setDeadline sets the connection's deadline to t unless it is set to t.
func (pc *h1Conn) setDeadline(t time.Time) {
	if !t.Equal(pc.dl) {
		_ = pc.c.SetDeadline(t)
		pc.dl = t
	}
}

// arm is called when a read or a write of an exchange whose cancellation
// is not armed yet failed with err. A timeout of the early deadline (see
// roundTrip) while the request is live arms it (context.AfterFunc) and
// puts the attempt's own deadline on the connection: the caller then
// retries the read or write. A cancelled request, a passed deadline or any
// other error end the exchange (false).
func (pc *h1Conn) arm(err error) bool {
	pc.c.late = nil
	if !errors.Is(err, os.ErrDeadlineExceeded) || pc.lateCtx.Err() != nil ||
		!pc.lateDL.IsZero() && !time.Now().Before(pc.lateDL) {
		return false
	}
	// the deadline first: a cancellation that comes at once (AfterFunc
	// runs its callback then) must not be overwritten by it
	pc.setDeadline(pc.lateDL)
	pc.stop = context.AfterFunc(pc.lateCtx, pc.onCancel)
	return true
}

// cancel ends the exchange in flight when its request's context is done:
// a deadline in the past ends a blocked write or read at once.
func (pc *h1Conn) cancel() {
	pc.canceled.Store(true)
	_ = pc.c.SetDeadline(aLongTimeAgo)
}

// replayable reports whether req may be sent again after its connection
// failed with nothing read back (the rule of http.Transport): a body that
// can be rewound, and an idempotent method or an idempotency key.
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
}

// done ends pc's exchange: back to the pool when keep and no cancellation
// touched it, closed otherwise.
func (pc *h1Conn) done(stop func() bool, keep bool) {
	if stop != nil && !stop() || pc.canceled.Load() {
		keep = false
	}
	if !keep {
		_ = pc.c.Close()
		return
	}
	pc.t.put(pc)
}

// h1Body streams a response body; its connection is released when the
// body reaches its end (pooled) or is closed before (closed). Close may be
// called from another goroutine while a Read blocks: it closes the
// connection, which ends the Read.
type h1Body struct {
	rc       io.Reader
	pc       *h1Conn
	stop     func() bool
	keep     bool
	closed   atomic.Bool
	released atomic.Bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, ErrBodyClosed
	}
	if b.released.Load() {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err != nil && b.released.CompareAndSwap(false, true) {
		b.pc.done(b.stop, b.keep && err == io.EOF)
	}
	return n, err
}

func (b *h1Body) Close() error {
	b.closed.Store(true)
	if b.released.CompareAndSwap(false, true) {
		b.pc.done(b.stop, false)
	}
	return nil
}
