package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// syncBuf is a log sink tests read.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testServer struct {
	*Server
	ln       *Listener
	addr     string
	log      *syncBuf
	refusals atomic.Int64
}

// startServer serves h on a loopback h1.Listener (plain), as the gateway
// does; mod adjusts the server before it starts.
func startServer(t *testing.T, h http.Handler, mod func(*Server)) *testServer {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{log: &syncBuf{}}
	ts.ln = NewListener(inner, nil, 0, maxHeaderBytes, func(net.Conn, string) { ts.refusals.Add(1) }, discard)
	ts.Server = &Server{Handler: h, MaxHeaderBytes: maxHeaderBytes, ErrorLog: log.New(ts.log, "", 0)}
	if mod != nil {
		mod(ts.Server)
	}
	ts.addr = inner.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ts.Serve(ts.ln); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		_ = ts.Close()
		<-done
	})
	return ts
}

// client is a raw connection to a test server.
type client struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func (ts *testServer) dial(t *testing.T) *client {
	t.Helper()
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

func (cl *client) send(s string) {
	cl.t.Helper()
	if _, err := io.WriteString(cl.c, s); err != nil {
		cl.t.Fatal(err)
	}
}

// response reads one response to a request of method and returns it with
// its body read.
func (cl *client) response(method string) (*http.Response, string) {
	cl.t.Helper()
	resp, err := http.ReadResponse(cl.br, &http.Request{Method: method})
	if err != nil {
		cl.t.Fatalf("reading the response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		cl.t.Fatalf("reading the body: %v", err)
	}
	return resp, string(b)
}

// closed reports whether the server closed the connection (nothing more
// to read).
func (cl *client) closed() bool {
	cl.t.Helper()
	n, err := cl.br.Read(make([]byte, 1))
	return n == 0 && err != nil
}

func echoPath(w http.ResponseWriter, r *http.Request) {
	_, _ = io.WriteString(w, r.Method+" "+r.URL.Path)
}

func TestServerKeepAlivePipelined(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(echoPath), nil)
	cl := ts.dial(t)
	cl.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\nPOST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc\r\nGET /d HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, want := range []string{"GET /a", "GET /b", "POST /c", "GET /d"} {
		resp, body := cl.response("GET")
		if resp.StatusCode != 200 || body != want || resp.ContentLength != int64(len(want)) || resp.Close {
			t.Fatalf("got %d %q (length %d, close %v), want 200 %q", resp.StatusCode, body, resp.ContentLength, resp.Close, want)
		}
		if resp.Header.Get("Date") == "" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Fatalf("header %v", resp.Header)
		}
	}
	// and sequentially, after the pipelined ones
	cl.send("GET /e HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, body := cl.response("GET"); body != "GET /e" {
		t.Fatalf("got %q", body)
	}
}

func TestServerHTTP10AndClose(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(echoPath), nil)
	for _, tc := range []struct {
		name, req string
		close     bool
		conn      string
	}{
		{"1.0", "GET /a HTTP/1.0\r\n\r\n", true, ""},
		{"1.0 keep-alive", "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", false, "keep-alive"},
		{"1.1 close", "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", true, ""}, // ReadResponse takes "close" out
		{"1.1", "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := ts.dial(t)
			cl.send(tc.req)
			resp, body := cl.response("GET")
			if body != "GET /a" || resp.Header.Get("Connection") != tc.conn || resp.Close != tc.close {
				t.Fatalf("got %q, Connection %q, close %v", body, resp.Header.Get("Connection"), resp.Close)
			}
			if tc.close {
				if !cl.closed() {
					t.Fatal("connection left open")
				}
				return
			}
			cl.send(tc.req) // the connection still serves
			if _, body := cl.response("GET"); body != "GET /a" {
				t.Fatalf("second request: %q", body)
			}
		})
	}
	t.Run("handler closes", func(t *testing.T) {
		ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "bye")
		}), nil)
		cl := ts.dial(t)
		cl.send("GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, body := cl.response("GET"); body != "bye" || !resp.Close {
			t.Fatalf("got %q close %v", body, resp.Close)
		}
		if !cl.closed() {
			t.Fatal("connection left open")
		}
	})
}

func TestServerNoBodyStatuses(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/head":
			_, _ = io.WriteString(w, "hello")
		case "/204":
			w.WriteHeader(204)
			if _, err := io.WriteString(w, "x"); err != http.ErrBodyNotAllowed {
				t.Errorf("write after 204: %v", err)
			}
		case "/304":
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Etag", `"x"`)
			w.WriteHeader(304)
		case "/103":
			w.Header().Set("Link", "</s.css>; rel=preload")
			w.WriteHeader(103)
			w.Header().Del("Link")
			_, _ = io.WriteString(w, "final")
		}
	}), nil)
	cl := ts.dial(t)
	cl.send("HEAD /head HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, body := cl.response("HEAD"); body != "" || resp.ContentLength != 5 {
		t.Fatalf("HEAD: %q length %d", body, resp.ContentLength)
	}
	for _, p := range []string{"/204", "/304"} {
		cl.send("GET " + p + " HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body := cl.response("GET")
		if body != "" || resp.Header.Get("Content-Length") != "" || len(resp.TransferEncoding) > 0 || resp.Header.Get("Content-Type") != "" {
			t.Fatalf("%s: %q %v", p, body, resp.Header)
		}
	}
	// 1xx: read raw, the informational head comes first
	cl.send("GET /103 HTTP/1.1\r\nHost: x\r\n\r\n")
	line, _ := cl.br.ReadString('\n')
	if line != "HTTP/1.1 103 Early Hints\r\n" {
		t.Fatalf("got %q", line)
	}
	for {
		l, _ := cl.br.ReadString('\n')
		if l == "\r\n" {
			break
		}
	}
	if resp, body := cl.response("GET"); resp.StatusCode != 200 || body != "final" || resp.Header.Get("Link") != "" {
		t.Fatalf("after 103: %d %q %v", resp.StatusCode, body, resp.Header)
	}
}

func TestServerExpectContinue(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/read" {
			b, _ := io.ReadAll(r.Body)
			_, _ = w.Write(b)
			return
		}
		_, _ = io.WriteString(w, "refused")
	}), nil)
	t.Run("read", func(t *testing.T) {
		cl := ts.dial(t)
		cl.send("POST /read HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
		line, err := cl.br.ReadString('\n')
		if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
			t.Fatalf("got %q %v", line, err)
		}
		if l, _ := cl.br.ReadString('\n'); l != "\r\n" {
			t.Fatalf("got %q", l)
		}
		cl.send("body")
		if _, body := cl.response("POST"); body != "body" {
			t.Fatalf("got %q", body)
		}
	})
	t.Run("not read", func(t *testing.T) {
		cl := ts.dial(t)
		cl.send("POST /no HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
		resp, body := cl.response("POST")
		if resp.StatusCode != 200 || body != "refused" || !resp.Close {
			t.Fatalf("got %d %q close %v", resp.StatusCode, body, resp.Close)
		}
		if !cl.closed() {
			t.Fatal("connection left open")
		}
	})
	t.Run("unknown expectation", func(t *testing.T) {
		cl := ts.dial(t)
		cl.send("POST /read HTTP/1.1\r\nHost: x\r\nExpect: something\r\nContent-Length: 4\r\n\r\nbody")
		if resp, _ := cl.response("POST"); resp.StatusCode != 417 {
			t.Fatalf("got %d", resp.StatusCode)
		}
	})
}

func TestServerChunkedRequestTrailers(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Trailer["X-Sum"]; !ok || r.Trailer.Get("X-Sum") != "" {
			t.Errorf("declared trailer before the body: %v", r.Trailer)
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("body: %v", err)
		}
		fmt.Fprintf(w, "%s|%s|%d|%v", b, r.Trailer.Get("X-Sum"), r.ContentLength, r.TransferEncoding)
	}), nil)
	cl := ts.dial(t)
	cl.send("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Sum: 5\r\n\r\n")
	if _, body := cl.response("POST"); body != "abcde|5|-1|[chunked]" {
		t.Fatalf("got %q", body)
	}
	cl.send("GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n0\r\n\r\n")
	if _, body := cl.response("GET"); body != "||-1|[chunked]" {
		t.Fatalf("got %q", body)
	}
}

func TestServerUnreadBody(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(echoPath), nil)
	t.Run("drained", func(t *testing.T) {
		cl := ts.dial(t)
		body := strings.Repeat("x", 100<<10)
		cl.send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body)
		cl.send("POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
		cl.send("GET /c HTTP/1.1\r\nHost: x\r\n\r\n")
		for _, want := range []string{"POST /a", "POST /b", "GET /c"} {
			if resp, got := cl.response("GET"); got != want || resp.Close {
				t.Fatalf("got %q close %v, want %q", got, resp.Close, want)
			}
		}
	})
	t.Run("too long", func(t *testing.T) {
		cl := ts.dial(t)
		cl.send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\nxxxx")
		resp, got := cl.response("POST")
		if got != "POST /a" || !resp.Close {
			t.Fatalf("got %q close %v", got, resp.Close)
		}
		if !cl.closed() {
			t.Fatal("connection left open")
		}
	})
}

func TestServerRefusals(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(echoPath), nil)
	for _, tc := range []struct {
		name, req string
		status    int
		refusal   bool
	}{
		{"duplicate Content-Length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400, true},
		{"Content-Length and chunked", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, true},
		{"chunked on 1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, true},
		{"head too large", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", maxHeaderBytes+4096) + "\r\n\r\n", 431, false},
		{"malformed request line", "GET /\r\nHost: x\r\n\r\n", 400, false},
		{"bad version", "GET / HTTP/1.x\r\nHost: x\r\n\r\n", 400, false},
		{"HTTP/3", "GET / HTTP/3.0\r\nHost: x\r\n\r\n", 505, false},
		{"malformed field", "GET / HTTP/1.1\r\nHost: x\r\nNo colon\r\n\r\n", 400, false},
		{"space before colon", "GET / HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n", 400, false},
		{"missing Host", "GET / HTTP/1.1\r\n\r\n", 400, false},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, false},
		{"bad Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, false},
		{"bad Content-Length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, false},
		{"unknown coding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, false},
		{"bad chunk", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 200, false}, // the handler ignores the body; the connection closes
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.refusals.Load()
			cl := ts.dial(t)
			cl.send(tc.req)
			resp, _ := cl.response("GET")
			if resp.StatusCode != tc.status {
				t.Fatalf("got %d, want %d", resp.StatusCode, tc.status)
			}
			if !cl.closed() {
				t.Fatal("connection left open")
			}
			if got := ts.refusals.Load() - before; (got == 1) != tc.refusal {
				t.Fatalf("%d refusals counted", got)
			}
		})
	}
}

func TestServerRequestFields(t *testing.T) {
	got := make(chan *http.Request, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r
	}), func(s *Server) { s.Base = &http.Server{} })
	cl := ts.dial(t)
	cl.send("GET http://example.com/p%20q?x=1 HTTP/1.1\r\nHost: other\r\nuser-agent: t\r\nX-Multi: a\r\nX-Multi: b\r\nX-Fold: a\r\n  b\r\n\r\n")
	r := <-got
	cl.response("GET")
	if r.Host != "example.com" || r.URL.Host != "example.com" || r.URL.Path != "/p q" || r.URL.RawQuery != "x=1" || r.RequestURI != "http://example.com/p%20q?x=1" {
		t.Fatalf("target: host %q url %#v uri %q", r.Host, r.URL, r.RequestURI)
	}
	if r.Proto != "HTTP/1.1" || r.ProtoMajor != 1 || r.ProtoMinor != 1 || r.RemoteAddr != cl.c.LocalAddr().String() || r.TLS != nil {
		t.Fatalf("proto %q remote %q", r.Proto, r.RemoteAddr)
	}
	if r.Header.Get("User-Agent") != "t" || len(r.Header["X-Multi"]) != 2 || r.Header.Get("X-Fold") != "a b" || r.Header["Host"] != nil {
		t.Fatalf("header %v", r.Header)
	}
	if r.Context().Value(http.ServerContextKey) != ts.Base || r.Context().Value(http.LocalAddrContextKey).(net.Addr).String() != ts.addr {
		t.Fatal("context values")
	}
	if r.Context().Err() == nil {
		t.Fatal("the request's context is not cancelled after the handler returned")
	}
	cl.send("GET /plain?q HTTP/1.1\r\nHost: h:1\r\n\r\n")
	r = <-got
	cl.response("GET")
	if r.Host != "h:1" || r.URL.Path != "/plain" || r.URL.RawQuery != "q" || r.URL.Host != "" {
		t.Fatalf("host %q url %#v", r.Host, r.URL)
	}
}

func TestServerResponseFraming(t *testing.T) {
	big := strings.Repeat("b", 10000)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small":
			_, _ = io.WriteString(w, "small")
		case "/big":
			_, _ = io.WriteString(w, big)
		case "/declared":
			w.Header().Set("Content-Length", "3")
			_, _ = io.WriteString(w, "abc")
		case "/short":
			w.Header().Set("Content-Length", "10")
			_, _ = io.WriteString(w, "abc")
		case "/flush":
			_, _ = io.WriteString(w, "a")
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("flush: %v", err)
			}
			_, _ = io.WriteString(w, "b")
		case "/trailers":
			w.Header().Set("Trailer", "X-Declared")
			w.WriteHeader(200)
			_, _ = io.WriteString(w, "body")
			w.Header().Set("X-Declared", "d")
			w.Header().Set(http.TrailerPrefix+"X-Late", "l")
		case "/twice":
			w.WriteHeader(201)
			w.WriteHeader(202)
		case "/sniff":
			_, _ = io.WriteString(w, "<html><body>x</body></html>")
		case "/notype":
			w.Header()["Content-Type"] = nil
			_, _ = io.WriteString(w, "<html>")
		}
	}), nil)
	cl := ts.dial(t)
	check := func(path string, f func(*http.Response, string)) {
		t.Helper()
		cl.send("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body := cl.response("GET")
		f(resp, body)
	}
	check("/small", func(r *http.Response, b string) {
		if r.ContentLength != 5 || len(r.TransferEncoding) != 0 || b != "small" {
			t.Fatalf("small: %d %v %q", r.ContentLength, r.TransferEncoding, b)
		}
	})
	check("/big", func(r *http.Response, b string) {
		if r.ContentLength != -1 || len(r.TransferEncoding) != 1 || b != big {
			t.Fatalf("big: %d %v", r.ContentLength, r.TransferEncoding)
		}
	})
	check("/declared", func(r *http.Response, b string) {
		if r.ContentLength != 3 || b != "abc" {
			t.Fatalf("declared: %d %q", r.ContentLength, b)
		}
	})
	check("/flush", func(r *http.Response, b string) {
		if r.ContentLength != -1 || b != "ab" {
			t.Fatalf("flush: %d %q", r.ContentLength, b)
		}
	})
	check("/trailers", func(r *http.Response, b string) {
		if b != "body" || r.Trailer.Get("X-Declared") != "d" || r.Trailer.Get("X-Late") != "l" || r.Header.Get("X-Declared") != "" {
			t.Fatalf("trailers: %q header %v trailer %v", b, r.Header, r.Trailer)
		}
	})
	check("/twice", func(r *http.Response, b string) {
		if r.StatusCode != 201 {
			t.Fatalf("twice: %d", r.StatusCode)
		}
		if !strings.Contains(ts.log.String(), "superfluous response.WriteHeader") {
			t.Fatalf("not logged: %q", ts.log.String())
		}
	})
	check("/sniff", func(r *http.Response, b string) {
		if r.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("sniff: %v", r.Header)
		}
	})
	check("/notype", func(r *http.Response, b string) {
		if _, ok := r.Header["Content-Type"]; ok {
			t.Fatalf("notype: %v", r.Header)
		}
	})
	// a response shorter than its Content-Length ends the connection
	cl.send("GET /short HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(cl.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); string(b) != "abc" || err != io.ErrUnexpectedEOF {
		t.Fatalf("short: %q %v", b, err)
	}
}

func TestServerHijack(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		line, _ := brw.ReadString('\n')
		_, _ = brw.WriteString("echo " + line)
		_ = brw.Flush()
	}), nil)
	cl := ts.dial(t)
	// the bytes after the upgrade request are sent at once: they reach
	// the hijacker, not the server's parser
	cl.send("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nGET /not-a-request\n")
	resp, err := http.ReadResponse(cl.br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("%v %v", resp, err)
	}
	line, _ := cl.br.ReadString('\n')
	if line != "echo GET /not-a-request\n" {
		t.Fatalf("got %q", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil { // a hijacked connection is not waited for
		t.Fatal(err)
	}
}

func TestServerResponseController(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for _, err := range []error{rc.SetReadDeadline(time.Now().Add(time.Minute)), rc.SetWriteDeadline(time.Now().Add(time.Minute)), rc.EnableFullDuplex()} {
			if err != nil {
				t.Errorf("controller: %v", err)
			}
		}
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}), nil)
	cl := ts.dial(t)
	cl.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
	if _, body := cl.response("POST"); body != "ok" {
		t.Fatalf("got %q", body)
	}
}

// The request's context ends when the client goes away mid-request.
func TestServerClientGone(t *testing.T) {
	cancelled := make(chan struct{})
	started := make(chan struct{})
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	}), nil)
	cl := ts.dial(t)
	cl.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	_ = cl.c.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the context was not cancelled when the client closed")
	}
}

// A request answered quickly and one whose next request comes while it
// runs are not disturbed by the watch.
func TestServerWatchKeepsPipelinedByte(t *testing.T) {
	release := make(chan struct{})
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
				t.Error("cancelled")
			}
		}
		echoPath(w, r)
	}), nil)
	watching := make(chan struct{}, 1)
	onWatchRead = func() { watching <- struct{}{} }
	defer func() { onWatchRead = nil }()
	cl := ts.dial(t)
	cl.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-watching
	cl.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	close(release)
	for _, want := range []string{"GET /slow", "GET /next"} {
		if _, got := cl.response("GET"); got != want {
			t.Fatalf("got %q want %q", got, want)
		}
	}
}

func TestServerTimeouts(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(echoPath), func(s *Server) {
		s.ReadHeaderTimeout = 200 * time.Millisecond
		s.IdleTimeout = 300 * time.Millisecond
	})
	t.Run("slow head", func(t *testing.T) {
		cl := ts.dial(t)
		cl.send("GET / HTTP/1.1\r\nHost:")
		start := time.Now()
		if !cl.closed() {
			t.Fatal("not closed")
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("closed after %v", d)
		}
	})
	t.Run("idle", func(t *testing.T) {
		cl := ts.dial(t)
		cl.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		cl.response("GET")
		start := time.Now()
		if !cl.closed() {
			t.Fatal("not closed")
		}
		if d := time.Since(start); d < 250*time.Millisecond {
			t.Fatalf("closed after %v, before the idle timeout", d)
		}
	})
}

func TestServerShutdown(t *testing.T) {
	inHandler := make(chan struct{})
	release := make(chan struct{})
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(inHandler)
			<-release
		}
		echoPath(w, r)
	}), nil)
	idle := ts.dial(t)
	idle.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	idle.response("GET")
	busy := ts.dial(t)
	busy.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-inHandler
	done := make(chan error, 1)
	go func() { done <- ts.Shutdown(context.Background()) }()
	if !idle.closed() {
		t.Fatal("idle connection not closed")
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned with a request in flight: %v", err)
	default:
	}
	close(release)
	resp, body := busy.response("GET")
	if body != "GET /slow" || !resp.Close {
		t.Fatalf("in flight: %q close %v", body, resp.Close)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", ts.addr); err == nil {
		t.Fatal("still accepting")
	}
}

func TestServerPanics(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "partial")
		if r.URL.Path == "/abort" {
			panic(http.ErrAbortHandler)
		}
		panic("boom")
	}), nil)
	for _, p := range []string{"/abort", "/boom"} {
		cl := ts.dial(t)
		cl.send("GET " + p + " HTTP/1.1\r\nHost: x\r\n\r\n")
		if b, _ := io.ReadAll(cl.br); len(b) != 0 {
			t.Fatalf("%s: sent %q", p, b)
		}
	}
	logged := ts.log.String()
	if strings.Count(logged, "http: panic serving") != 1 || !strings.Contains(logged, "boom") || !strings.Contains(logged, "goroutine ") {
		t.Fatalf("log: %q", logged)
	}
}

// After a body was streamed chunked, a panic (ErrAbortHandler, as the
// relay raises when its upstream body breaks) leaves the response
// unterminated.
func TestServerAbortAfterHeader(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first")
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}), nil)
	cl := ts.dial(t)
	cl.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(cl.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); string(b) != "first" || err == nil {
		t.Fatalf("got %q %v, want a broken body", b, err)
	}
}

func TestServerParksIdleConnection(t *testing.T) {
	if !parkSupported {
		t.Skip("no parking here")
	}
	ts := startServer(t, http.HandlerFunc(echoPath), nil)
	parked := make(chan struct{}, 4)
	ts.ln.SetOnPark(func() { parked <- struct{}{} })
	cl := ts.dial(t)
	for _, p := range []string{"/one", "/two"} {
		cl.send("GET " + p + " HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, body := cl.response("GET"); body != "GET "+p {
			t.Fatalf("got %q", body)
		}
		select {
		case <-parked:
		case <-time.After(10 * time.Second):
			t.Fatal("not parked")
		}
	}
}
