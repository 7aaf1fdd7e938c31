package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/veerhq/veer/internal/selfsigned"
)

// sendAll writes req on a raw connection to ts from a goroutine of its own
// (a client that sends its whole request before it reads, as most do),
// and returns the connection and the write's result.
func sendAll(t *testing.T, ts *testServer, req string) (*client, <-chan error) {
	t.Helper()
	return sendOn(t, ts.dial(t), req)
}

func sendOn(t *testing.T, cl *client, req string) (*client, <-chan error) {
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(cl.c, req)
		wrote <- err
	}()
	t.Cleanup(func() {
		_ = cl.c.Close()
	})
	return cl, wrote
}

// tookAll: the server read every byte the client sent (a write the reset
// failed would have raced the answer in an HTTP client).
func tookAll(t *testing.T, wrote <-chan error) {
	t.Helper()
	if err := <-wrote; err != nil {
		t.Fatalf("client's write: %v", err)
	}
}

// endsClean reads the rest of the stream after a response: the server
// must have ended it with a FIN (io.EOF), not a reset, which destroys a
// response the client has not read yet.
func endsClean(t *testing.T, cl *client) {
	t.Helper()
	_, err := io.Copy(io.Discard, cl.br)
	if errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection reset by the server: %v", err)
	}
	if err != nil {
		t.Fatalf("after the response: %v", err)
	}
}

func filler(n int) string { return strings.Repeat("b", n) }

// TestServerClosesWithoutReset: every way the server ends a connection
// whose client is still sending (a request body it did not read, bytes
// after a request it refused) sends the response, then a FIN, and reads
// what still comes until the client closes: a close with unread bytes
// makes the kernel answer with a reset, and a client that had not read
// the response yet loses it.
func TestServerClosesWithoutReset(t *testing.T) {
	const big = 64 << 10 // more than the server's read buffer: unread at the close
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/panic":
			panic("boom")
		case "/abort":
			panic(http.ErrAbortHandler)
		case "/shed":
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}), nil)
	for _, tc := range []struct {
		name, req string
		status    int
	}{
		{"unknown expectation", "POST / HTTP/1.1\r\nHost: x\r\nExpect: nonsense\r\nContent-Length: " + strconv.Itoa(big) + "\r\n\r\n" + filler(big), 417},
		{"missing host", "POST / HTTP/1.1\r\nContent-Length: " + strconv.Itoa(big) + "\r\n\r\n" + filler(big), 400},
		{"bad version", "POST / HTTP/1.7x\r\nHost: x\r\nContent-Length: " + strconv.Itoa(big) + "\r\n\r\n" + filler(big), 400},
		{"unsupported coding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n" + filler(big), 501},
		{"head too large", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + filler(maxHeaderBytes+16<<10) + "\r\n\r\n", 431},
		{"panic", "POST /panic HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(big) + "\r\n\r\n" + filler(big), 0},
		{"abort", "POST /abort HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(big) + "\r\n\r\n" + filler(big), 0},
		{"shed with close", "POST /shed HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(big) + "\r\n\r\n" + filler(big), 503},
		{"client asks close", "POST /shed HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(big) + "\r\n\r\n" + filler(big), 503},
		{"too long to drain", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(512<<10) + "\r\n\r\n" + filler(512<<10), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, wrote := sendAll(t, ts, tc.req)
			if tc.status == 0 {
				endsClean(t, cl)
				tookAll(t, wrote)
				return
			}
			resp, err := http.ReadResponse(cl.br, nil)
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				t.Fatalf("response body: %v", err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			endsClean(t, cl)
			tookAll(t, wrote)
		})
	}
}

// Over TLS the server sends close_notify and a FIN, then drains the TCP
// connection under the TLS one: the client reads the answer and a clean
// end, not a reset.
func TestServerClosesWithoutResetTLS(t *testing.T) {
	addr := startTLSServer(t, http.HandlerFunc(echoPath))
	const big = 256 << 10
	for _, tc := range []struct{ name, req string }{
		{"unknown expectation", "POST / HTTP/1.1\r\nHost: x\r\nExpect: nonsense\r\nContent-Length: " + strconv.Itoa(big) + "\r\n\r\n" + filler(big)},
		{"missing host", "POST / HTTP/1.1\r\nContent-Length: " + strconv.Itoa(big) + "\r\n\r\n" + filler(big)},
		{"refused framing", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n" + filler(big)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, wrote := sendOn(t, dialTLS(t, addr), tc.req)
			resp, err := http.ReadResponse(cl.br, nil)
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				t.Fatalf("response body: %v", err)
			}
			endsClean(t, cl)
			tookAll(t, wrote)
		})
	}
}

// startTLSServer serves h on a loopback h1.Listener under TLS (a
// self-signed certificate) and returns its address.
func startTLSServer(t *testing.T, h http.Handler) string {
	t.Helper()
	certFile, keyFile, _, err := selfsigned.Files(t.TempDir(), "h1", "localhost", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	ln := NewListener(inner, conf, 5*time.Second, maxHeaderBytes, nil, discard)
	srv := &Server{Handler: h, MaxHeaderBytes: maxHeaderBytes, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return inner.Addr().String()
}

func dialTLS(t *testing.T, addr string) *client {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

// A handler whose read of the body timed out (ReadTimeout) and that
// closed the body answers; the rest of the body still arriving is read
// until the client closes, not left unread at the close.
func TestServerClosesWithoutResetAfterReadTimeout(t *testing.T) {
	timedOut, sent := make(chan struct{}), make(chan struct{})
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("body read: %v, want a timeout", err)
		}
		_ = r.Body.Close()
		close(timedOut)
		<-sent
		w.WriteHeader(http.StatusRequestTimeout)
	}), func(s *Server) { s.ReadTimeout = 200 * time.Millisecond })
	const size = 64 << 10
	cl := ts.dial(t)
	cl.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(size) + "\r\n\r\n" + filler(1<<10))
	<-timedOut
	cl.send(filler(8 << 10)) // the rest comes late
	close(sent)
	_ = cl.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(cl.br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	endsClean(t, cl)
}

// TestServerLingerSteps: the close of a connection whose client is still
// sending lasts until the client closes, however slow it is (a starved
// client sends the rest of its body, reads the answer and closes seconds
// later), within bounds: lingerIdle without a byte, lingerTotal in all,
// lingerMaxBytes read. Virtual time over net.Pipe.
func TestServerLingerSteps(t *testing.T) {
	const size = 64 << 10
	head := "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(size) + "\r\n\r\n"
	for _, tc := range []struct {
		name string
		// client acts after the answer was read and returns the error of
		// its last write (nil: every byte it sent was taken)
		client func(c net.Conn) error
		closed time.Duration // after the answer, when the server closes
	}{
		{"rest after a pause, then closes", func(c net.Conn) error {
			time.Sleep(1500 * time.Millisecond)
			_, err := io.WriteString(c, filler(size-8<<10))
			_ = c.Close()
			return err
		}, 1500 * time.Millisecond},
		{"2 MiB more at once, then closes", func(c net.Conn) error {
			_, err := io.WriteString(c, filler(2<<20)) // more than a pipelined body's 256 KiB
			_ = c.Close()
			return err
		}, 0},
		{"sends nothing, stays open", func(c net.Conn) error { return nil }, lingerIdle},
		{"trickles", func(c net.Conn) error {
			for {
				time.Sleep(lingerIdle / 2)
				if _, err := io.WriteString(c, "x"); err != nil {
					return nil // cut at lingerTotal
				}
			}
		}, lingerTotal},
		{"floods", func(c net.Conn) error {
			var err error
			for err == nil {
				_, err = io.WriteString(c, filler(64<<10))
			}
			return nil
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Connection", "close") // shed's 503 for a body it will not drain
					w.WriteHeader(http.StatusServiceUnavailable)
				}), ErrorLog: log.New(io.Discard, "", 0)}
				cs, ss := net.Pipe()
				done := make(chan struct{})
				go func() { s.serveConn(ss); close(done) }()
				wrote := make(chan error, 1)
				go func() {
					_, err := io.WriteString(cs, head+filler(8<<10))
					wrote <- err
				}()
				resp, err := http.ReadResponse(bufio.NewReader(cs), nil)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != 503 || !resp.Close {
					t.Fatalf("got %d close %v", resp.StatusCode, resp.Close)
				}
				if err := <-wrote; err != nil {
					t.Fatalf("first part of the body: %v", err)
				}
				t0 := time.Now()
				cerr := make(chan error, 1)
				go func() { cerr <- tc.client(cs) }()
				<-done
				if d := time.Since(t0); d != tc.closed {
					t.Errorf("closed %v after the answer, want %v", d, tc.closed)
				}
				_ = cs.Close()
				if err := <-cerr; err != nil {
					t.Errorf("client's write: %v", err)
				}
			})
		})
	}
}

// A lingering close holds its connection in the server: Shutdown waits
// for it (a client that takes its time is not cut by a restart), Close
// ends it at once.
func TestServerLingerShutdownAndClose(t *testing.T) {
	for _, shutdown := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Connection", "close")
				w.WriteHeader(http.StatusTooManyRequests)
			}), ErrorLog: log.New(io.Discard, "", 0)}
			cs, ss := net.Pipe()
			defer cs.Close()
			done := make(chan struct{})
			go func() { s.serveConn(ss); close(done) }()
			go func() { _, _ = io.WriteString(cs, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nabc") }()
			if resp, err := http.ReadResponse(bufio.NewReader(cs), nil); err != nil || resp.StatusCode != 429 {
				t.Fatalf("got %v %v", resp, err)
			}
			synctest.Wait() // the connection lingers, its client silent
			t0 := time.Now()
			if shutdown {
				if err := s.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				if d := time.Since(t0); d != lingerIdle {
					t.Errorf("Shutdown returned after %v, want the linger's %v", d, lingerIdle)
				}
			} else {
				_ = s.Close()
			}
			<-done
			if d := time.Since(t0); !shutdown && d != 0 {
				t.Errorf("Close ended the linger after %v", d)
			}
		})
	}
}

// An answer whose end is the connection's close (HTTP/1.0, no length) and
// whose handler aborts after part of it went out (the relay, when its
// upstream body breaks) ends in a reset: a FIN, or under TLS a
// close_notify, would make the part look like the whole answer.
func TestServerAbortCloseDelimitedResets(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, filler(3000)) // past the held 2 KiB: the header goes out without a length
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	})
	ts := startServer(t, h, nil)
	tlsAddr := startTLSServer(t, h)
	for _, tc := range []struct {
		name string
		dial func(t *testing.T) *client
	}{
		{"plain", ts.dial},
		{"TLS", func(t *testing.T) *client { return dialTLS(t, tlsAddr) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := tc.dial(t)
			cl.send("GET / HTTP/1.0\r\n\r\n")
			resp, err := http.ReadResponse(cl.br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ContentLength != -1 || !resp.Close {
				t.Fatalf("length %d close %v, want an answer ended by the close", resp.ContentLength, resp.Close)
			}
			if b, err := io.ReadAll(resp.Body); err == nil {
				t.Fatalf("read %d bytes and a clean end: the part looks whole", len(b))
			} else if tc.name == "plain" && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("read %d bytes, then %v: want a reset", len(b), err)
			}
		})
	}
}
