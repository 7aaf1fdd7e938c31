package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawBackend is a real TCP server that reads HTTP/1.1 requests and answers
// each with a canned byte string, closing the connection after it when
// closeAfter. It records the requests' bodies and trailers and counts the
// connections it accepted.
type rawBackend struct {
	ln       net.Listener
	accepted atomic.Int32
	mu       sync.Mutex
	bodies   []string
	trailers []http.Header
	answer   func(r *http.Request) (resp string, closeAfter bool)
	closed   chan struct{} // one value per connection the backend closed
	wg       sync.WaitGroup
}

func newRawBackend(t *testing.T, answer func(r *http.Request) (string, bool)) *rawBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &rawBackend{ln: ln, answer: answer, closed: make(chan struct{}, 64)}
	var conns sync.Map
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.accepted.Add(1)
			conns.Store(c, true)
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				defer func() {
					c.Close()
					b.closed <- struct{}{}
				}()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body, _ := io.ReadAll(r.Body)
					b.mu.Lock()
					b.bodies = append(b.bodies, string(body))
					b.trailers = append(b.trailers, r.Trailer)
					b.mu.Unlock()
					resp, closeAfter := b.answer(r)
					if _, err := io.WriteString(c, resp); err != nil || closeAfter {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		b.wg.Wait()
	})
	return b
}

func (b *rawBackend) addr() string { return b.ln.Addr().String() }

func testH1Client(t *testing.T) *Client {
	t.Helper()
	c := newTestClient(nil, 4)
	t.Cleanup(c.Close)
	return c
}

func rt(t *testing.T, c http.RoundTripper, method, url string, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, url, err)
	}
	resp.Body.Close()
	return resp, string(b)
}

// Response framing: each answer is read to its exact end, and the
// connection is reused exactly when the framing and the headers allow it.
func TestH1ClientResponseFraming(t *testing.T) {
	for _, tc := range []struct {
		name, method, resp string
		closeAfter         bool
		body               string
		trailer            string // X-T trailer expected
		status             int
		reused             bool
	}{
		{name: "content-length", method: "GET", resp: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc", body: "abc", status: 200, reused: true},
		{name: "chunked with trailer", method: "GET", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: v\r\n\r\n", body: "abcde", trailer: "v", status: 200, reused: true},
		{name: "HEAD has no body", method: "HEAD", resp: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", body: "", status: 200, reused: true},
		{name: "204 has no body", method: "GET", resp: "HTTP/1.1 204 No Content\r\n\r\n", body: "", status: 204, reused: true},
		{name: "304 has no body", method: "GET", resp: "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", body: "", status: 304, reused: true},
		{name: "1xx skipped", method: "GET", resp: "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", body: "ok", status: 200, reused: true},
		{name: "Connection: close", method: "GET", resp: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", closeAfter: true, body: "ok", status: 200, reused: false},
		{name: "close-delimited", method: "GET", resp: "HTTP/1.1 200 OK\r\n\r\nhello", closeAfter: true, body: "hello", status: 200, reused: false},
		{name: "HTTP/1.0 without keep-alive", method: "GET", resp: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", closeAfter: true, body: "ok", status: 200, reused: false},
		{name: "head too large: error, bounded memory", method: "GET", resp: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", status: -1},
		{name: "500 with body", method: "GET", resp: "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops", body: "oops", status: 500, reused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := newRawBackend(t, func(*http.Request) (string, bool) { return tc.resp, tc.closeAfter })
			c := testH1Client(t)
			if tc.status < 0 {
				req, _ := http.NewRequest(tc.method, "http://"+be.addr()+"/x", nil)
				if _, err := c.RoundTrip(req); !errors.Is(err, ErrHeadTooLarge) {
					t.Fatalf("err %v, want errHeadTooLarge", err)
				}
				return
			}
			for i := range 2 {
				resp, body := rt(t, c, tc.method, "http://"+be.addr()+"/x", nil)
				if resp.StatusCode != tc.status || body != tc.body {
					t.Fatalf("request %d: %d %q, want %d %q", i, resp.StatusCode, body, tc.status, tc.body)
				}
				if got := resp.Trailer.Get("X-T"); got != tc.trailer {
					t.Fatalf("request %d: trailer %q, want %q", i, got, tc.trailer)
				}
			}
			want := int32(2)
			if tc.reused {
				want = 1
			}
			if n := be.accepted.Load(); n != want {
				t.Fatalf("backend accepted %d connections for 2 requests, want %d", n, want)
			}
		})
	}
}

// Request framing: a body of known length goes with Content-Length on the
// client's own connection; a streamed one (unknown length, trailers) goes
// through the fallback http.Transport, chunked with its trailers, and the
// backend reads both whole.
func TestH1ClientRequestFraming(t *testing.T) {
	be := newRawBackend(t, func(*http.Request) (string, bool) { return "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false })
	c := testH1Client(t)
	rt(t, c, "POST", "http://"+be.addr()+"/", strings.NewReader("hello"))
	rt(t, c, "PUT", "http://"+be.addr()+"/", strings.NewReader(""))
	if n := be.accepted.Load(); n != 1 {
		t.Fatalf("%d connections for two known-length bodies, want 1", n)
	}
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", "http://"+be.addr()+"/", pr)
	req.Trailer = http.Header{"X-Sum": nil}
	go func() {
		_, _ = io.WriteString(pw, "streamed")
		req.Trailer.Set("X-Sum", "42")
		pw.Close()
	}()
	if c.Handles(req) {
		t.Fatal("the client takes a streamed body itself")
	}
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	be.mu.Lock()
	defer be.mu.Unlock()
	if len(be.bodies) != 3 || be.bodies[0] != "hello" || be.bodies[1] != "" || be.bodies[2] != "streamed" || be.trailers[2].Get("X-Sum") != "42" {
		t.Fatalf("backend read %q, trailers %v", be.bodies, be.trailers)
	}
}

// A body closed before its end closes its connection (it is not drained
// and not pooled); the next request gets a new one and its own answer.
func TestH1ClientEarlyCloseDropsConnection(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	be := newRawBackend(t, func(r *http.Request) (string, bool) {
		if r.URL.Path == "/big" {
			return "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n" + big, false
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nsmall", false
	})
	c := testH1Client(t)
	req, _ := http.NewRequest("GET", "http://"+be.addr()+"/big", nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(buf); !errors.Is(err, ErrBodyClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if _, body := rt(t, c, "GET", "http://"+be.addr()+"/small", nil); body != "small" {
		t.Fatalf("second answer %q", body)
	}
	if n := be.accepted.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// An idle pooled connection the backend closed is not used: a GET and a
// POST after it both succeed, on a new connection.
func TestH1ClientIdleClosedByBackend(t *testing.T) {
	be := newRawBackend(t, func(*http.Request) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true // keep-alive announced, then closed
	})
	c := testH1Client(t)
	for i, m := range []string{"GET", "POST", "GET"} {
		var body io.Reader
		if m == "POST" {
			body = strings.NewReader("data")
		}
		if i > 0 {
			<-be.closed // the pooled connection's peer is gone
		}
		if _, got := rt(t, c, m, "http://"+be.addr()+"/", body); got != "ok" {
			t.Fatalf("request %d (%s): %q", i, m, got)
		}
	}
	if n := be.accepted.Load(); n != 3 {
		t.Fatalf("%d connections, want 3", n)
	}
}

// Cancelling the request's context ends a RoundTrip waiting for a backend
// that never answers, and the connection is not pooled.
func TestH1ClientCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c := testH1Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+ln.Addr().String()+"/", nil)
	done := make(chan error, 1)
	go func() {
		_, err := c.RoundTrip(req)
		done <- err
	}()
	conn := <-accepted
	defer conn.Close()
	// the request is on the wire once the backend reads it
	if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RoundTrip after cancel: %v, want context.Canceled", err)
	}
	if n := len(c.pool(ln.Addr().String()).idle); n != 0 {
		t.Fatalf("%d idle connections after a cancelled request", n)
	}
}

// A connection reset before any byte of the request was written reports
// errUnwritten (fresh connection: no retry inside the client).
func TestH1ClientUnwritten(t *testing.T) {
	addr, dial := resetBeforeRead(t)
	c := newTestClient(dial, 4)
	defer c.Close()
	req, _ := http.NewRequest("POST", "http://"+addr+"/", strings.NewReader("x"))
	_, err := c.RoundTrip(req)
	if !errors.Is(err, ErrUnwritten) {
		t.Fatalf("err %v, want errUnwritten", err)
	}
}

// resetBeforeRead starts a real backend that accepts each connection and
// resets it (SO_LINGER 0) without reading. Its dial function connects and
// returns the connection once the backend has reset it, so that the
// request is written to a connection already gone: a reset sent at once
// and a request written right after connect otherwise race (the reset may
// even fail the connect).
func resetBeforeRead(t *testing.T) (string, func(ctx context.Context, network, addr string) (net.Conn, error)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resetNow := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case <-resetNow:
			case <-done:
			}
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if addr == ln.Addr().String() {
			resetNow <- struct{}{}
			var b [1]byte
			if n, _ := c.Read(b[:]); n > 0 { // returns with the reset
				c.Close()
				return nil, errors.New("backend sent data")
			}
		}
		return c, nil
	}
	return ln.Addr().String(), dial
}

// An attempt's deadline ends the wait for a response head that never
// comes with errTryTimeout; a head in time clears it for the body.
func TestH1ClientDeadline(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	held := make(chan net.Conn, 1)
	go func() {
		if c, err := silent.Accept(); err == nil {
			held <- c // accepted, never answered
		}
	}()
	c := testH1Client(t)
	req, _ := http.NewRequest("GET", "http://"+silent.Addr().String()+"/", nil)
	if _, err := c.RoundTripUntil(req, nil, time.Now().Add(50*time.Millisecond)); !errors.Is(err, ErrTryTimeout) {
		t.Fatalf("err %v, want errTryTimeout", err)
	}
	(<-held).Close()
	if n := len(c.pool(silent.Addr().String()).idle); n != 0 {
		t.Fatalf("%d idle connections after a timed-out attempt", n)
	}
	be := newRawBackend(t, func(*http.Request) (string, bool) { return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false })
	for range 2 {
		req, _ := http.NewRequest("GET", "http://"+be.addr()+"/", nil)
		resp, err := c.RoundTripUntil(req, nil, time.Now().Add(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("body %q", b)
		}
	}
	if n := be.accepted.Load(); n != 1 {
		t.Fatalf("%d connections, want 1 (pooled after a head in time)", n)
	}
}

// A connection in flight when CloseIdleConnections retires the client (a
// reload replaced it, or shutdown) is closed when its answer ends, not
// pooled.
func TestH1ClientRetiredConnectionNotPooled(t *testing.T) {
	be := newRawBackend(t, func(*http.Request) (string, bool) { return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false })
	c := testH1Client(t)
	req, _ := http.NewRequest("GET", "http://"+be.addr()+"/", nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := len(c.pool(be.addr()).idle); n != 0 {
		t.Fatalf("%d idle connections after CloseIdleConnections", n)
	}
	<-be.closed // the backend sees the connection closed
}

// Bytes a backend sends after a complete answer are not read as the next
// request's answer: the connection they arrived on is not reused.
func TestH1ClientStrayBytesNotRelayed(t *testing.T) {
	be := newRawBackend(t, func(r *http.Request) (string, bool) {
		if r.URL.Path == "/first" {
			return "HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nforge", false
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal", false
	})
	c := testH1Client(t)
	if resp, _ := rt(t, c, "GET", "http://"+be.addr()+"/first", nil); resp.StatusCode != 204 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	if _, body := rt(t, c, "GET", "http://"+be.addr()+"/second", nil); body != "real" {
		t.Fatalf("second answer %q: stray bytes of the first connection were relayed", body)
	}
}

// An exchange whose answer came whole with its head leaves its deadline on
// the pooled connection: the deadline passing while it idles does not
// fail the next exchange on it, and a connection the backend closed
// meanwhile is still found dead by the peek (the next deadline is set
// before it), so a POST is never sent on it.
func TestH1ClientExpiredDeadlinePooled(t *testing.T) {
	var n atomic.Int32
	be := newRawBackend(t, func(*http.Request) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", n.Add(1) == 3 // the third answer closes
	})
	c := testH1Client(t)
	send := func(method string, d time.Duration) {
		t.Helper()
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader("data")
		}
		req, _ := http.NewRequest(method, "http://"+be.addr()+"/", body)
		resp, err := c.RoundTripUntil(req, nil, time.Now().Add(d))
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "ok" {
			t.Fatalf("%s: body %q, %v", method, b, err)
		}
	}
	send("GET", 30*time.Millisecond)
	if idle := c.pool(be.addr()).idle; len(idle) != 1 || idle[0].dl.IsZero() {
		t.Fatal("the connection was not pooled with its deadline left set")
	}
	time.Sleep(60 * time.Millisecond) // the deadline passes while it idles
	send("GET", 5*time.Second)
	if got := be.accepted.Load(); got != 1 {
		t.Fatalf("%d connections, want 1: the idle one was not reused", got)
	}
	send("GET", 30*time.Millisecond) // the third: the backend closes after it
	<-be.closed
	time.Sleep(60 * time.Millisecond)
	send("POST", 5*time.Second)
	if got := be.accepted.Load(); got != 2 {
		t.Fatalf("%d connections, want 2", got)
	}
}

// The request's cancellation is armed late (LateCancel): an answer that
// comes sooner arms none; a slow head arms it at LateCancel and is not
// failed by the early deadline; a cancellation before it ends the
// exchange by LateCancel, one after at once; a body that needs the
// connection arms it, so a cancellation ends a body read at once; the
// attempt's own deadline still ends it with ErrTryTimeout.
func TestH1ClientLateCancel(t *testing.T) {
	defer func(d time.Duration) { LateCancel = d }(LateCancel)
	LateCancel = 200 * time.Millisecond // the bounds below leave it half of it as margin
	var delay atomic.Int64              // before the head, ns
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(quit); ln.Close(); wg.Wait() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				wg.Add(1)
				go func() { defer wg.Done(); <-quit; c.Close() }()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					select {
					case <-time.After(time.Duration(delay.Load())):
					case <-quit:
						return
					}
					if r.URL.Path == "/stream" { // a head, then a body that never ends
						_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst")
						_, _ = io.Copy(io.Discard, br)
						return
					}
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()
	addr := ln.Addr().String()
	c := testH1Client(t)
	get := func(ctx context.Context, path string, deadline time.Time) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
		return c.RoundTripUntil(req, nil, deadline)
	}
	whole := func(resp *http.Response, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "ok" {
			t.Fatalf("body %q, %v", b, err)
		}
	}
	// a prompt answer: nothing armed, the connection pooled (three tries:
	// a busy machine may take LateCancel for one)
	for i := 0; ; i++ {
		whole(get(context.Background(), "/", time.Now().Add(5*time.Second)))
		idle := c.pool(addr).idle
		if len(idle) != 1 {
			t.Fatal("the connection of a prompt answer was not pooled")
		}
		if idle[0].stop == nil {
			break
		}
		if i == 2 {
			t.Fatal("prompt answers armed a cancellation")
		}
	}
	// a slow head: armed at LateCancel, the answer still read, pooled
	delay.Store(int64(3 * LateCancel))
	whole(get(context.Background(), "/", time.Now().Add(5*time.Second)))
	if idle := c.pool(addr).idle; len(idle) != 1 {
		t.Fatal("the connection of a slow answer was not pooled")
	}
	// a cancellation before LateCancel: seen by LateCancel
	delay.Store(int64(5 * time.Second))
	for _, after := range []time.Duration{LateCancel / 5, 2 * LateCancel} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(after, cancel)
		start := time.Now()
		_, err := get(ctx, "/", time.Now().Add(10*time.Second))
		took := time.Since(start)
		if !errors.Is(err, context.Canceled) || took > after+LateCancel+LateCancel/2 {
			t.Fatalf("cancelled after %v: %v after %v", after, err, took)
		}
		if after > LateCancel && took > after+LateCancel/2 {
			t.Fatalf("cancelled after arming (%v): ended after %v", after, took)
		}
	}
	// the attempt's own deadline
	start := time.Now()
	if _, err := get(context.Background(), "/", time.Now().Add(3*LateCancel)); !errors.Is(err, ErrTryTimeout) || time.Since(start) < 3*LateCancel {
		t.Fatalf("deadline: %v after %v", err, time.Since(start))
	}
	// a body that needs the connection: a cancellation ends its read
	delay.Store(0)
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := get(ctx, "/stream", time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(2*LateCancel, cancel)
	start = time.Now()
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || time.Since(start) > 2*LateCancel+LateCancel/2 {
		t.Fatalf("body read after a cancellation: %v after %v", err, time.Since(start))
	}
}
