package h1

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// deadlineConn records the read and write deadlines put on it.
type deadlineConn struct {
	net.Conn // nil: only the methods below are called
	reads    []time.Time
	writes   []time.Time
	in       string
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.reads = append(c.reads, t)
	return nil
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.writes = append(c.writes, t)
	return nil
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.reads = append(c.reads, t)
	c.writes = append(c.writes, t)
	return nil
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	if c.in == "" {
		return 0, io.EOF
	}
	n := copy(p, c.in)
	c.in = c.in[n:]
	return n, nil
}

// A framedConn puts a deferred read deadline on the connection with the
// next read, once, and puts the recorded one back after a deadline of
// its own (the grace read's) or after the raw connection's was cleared.
func TestFramedConnDeferredDeadlines(t *testing.T) {
	base := time.Unix(1_000_000, 0)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	raw := &deadlineConn{}
	c := newFramedConn(raw, 1<<10, nil)
	c.f.st = fOpen // reads pass through: the test is about the deadlines
	read := func() { raw.in = "x"; _, _ = c.Read(make([]byte, 4)) }
	steps := []struct {
		name string
		do   func()
		want []time.Time // deadlines put on the connection by the step
	}{
		{"set: on the connection at once", func() { _ = c.SetReadDeadline(at(1)) }, []time.Time{at(1)}},
		{"read: already there", read, nil},
		{"deferred: not yet", func() { c.deferReadDeadline(at(2)) }, nil},
		{"deferred again: not yet", func() { c.deferReadDeadline(at(3)) }, nil},
		{"read: the last deferred one", read, []time.Time{at(3)}},
		{"read: already there", read, nil},
		{"own deadline (grace): at once", func() { c.putRD(at(4)) }, []time.Time{at(4)}},
		{"read: the recorded one back", read, []time.Time{at(3)}},
		{"deferred to none", func() { c.deferReadDeadline(time.Time{}) }, nil},
		{"read: none", read, []time.Time{{}}},
		{"deferred", func() { c.deferReadDeadline(at(5)) }, nil},
		{"set: replaces a deferred one", func() { _ = c.SetDeadline(at(6)) }, []time.Time{at(6)}},
		{"read: already there", read, nil},
		{"raw cleared beneath (park)", c.rawCleared, nil},
		{"read: the recorded one back", read, []time.Time{at(6)}},
	}
	for _, s := range steps {
		raw.reads = nil
		s.do()
		if len(raw.reads) != len(s.want) {
			t.Fatalf("%s: deadlines set %v, want %v", s.name, raw.reads, s.want)
		}
		for i := range s.want {
			if !raw.reads[i].Equal(s.want[i]) {
				t.Fatalf("%s: deadlines set %v, want %v", s.name, raw.reads, s.want)
			}
		}
		if got := c.readDeadline(); s.name == "read: none" && !got.IsZero() {
			t.Fatalf("%s: recorded %v", s.name, got)
		}
	}
}

// setWriteTimeout keeps the connection's write deadline while it bounds
// the response to between d and d+d/8, and puts a new one otherwise.
func TestSetWriteTimeout(t *testing.T) {
	base := time.Unix(1_000_000, 0)
	const d = 8 * time.Second // d/writeSlack = 1 s
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	raw := &deadlineConn{}
	c := &conn{rwc: raw}
	steps := []struct {
		name    string
		now     time.Time
		d       time.Duration
		touched bool
		want    []time.Time // deadlines put on the connection
	}{
		{"first request", ms(0), d, false, []time.Time{ms(9000)}},
		{"0.5 s later: within d+d/8", ms(500), d, false, nil},
		{"1 s later: exactly d", ms(1000), d, false, nil},
		{"1.001 s later: under d, renewed", ms(1001), d, false, []time.Time{ms(10001)}},
		{"a handler set one", ms(1100), d, true, []time.Time{ms(10100)}},
		{"clock went back: over d+d/8, renewed", ms(0), d, false, []time.Time{ms(9000)}},
		{"no write timeout: cleared", ms(100), 0, false, []time.Time{{}}},
		{"no write timeout, none set: nothing", ms(200), 0, false, nil},
		{"no write timeout, a handler set one: cleared", ms(300), 0, true, []time.Time{{}}},
	}
	for _, s := range steps {
		raw.writes = nil
		if s.touched {
			c.wdTouched.Store(true)
		}
		c.setWriteTimeout(s.now, s.d)
		if len(raw.writes) != len(s.want) {
			t.Fatalf("%s: deadlines set %v, want %v", s.name, raw.writes, s.want)
		}
		for i := range s.want {
			if !raw.writes[i].Equal(s.want[i]) {
				t.Fatalf("%s: deadlines set %v, want %v", s.name, raw.writes, s.want)
			}
		}
	}
}

// The whole-request read deadline and the write deadline hold for every
// request of a keep-alive connection, also after it was parked: they are
// no longer set and cleared around each request.
func TestServerTimeoutsOnKeepAlive(t *testing.T) {
	if !parkSupported {
		t.Skip("no parking here")
	}
	// longer than the grace read's 250 ms (parkIdleAfter), whose deadline
	// must not be the one a request's reads meet
	const timeout = 600 * time.Millisecond
	type result struct {
		err error
		at  time.Time
	}
	results := make(chan result, 4)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/read":
			_, err := io.ReadAll(r.Body)
			results <- result{err, time.Now()}
		case "/write":
			chunk := []byte(strings.Repeat("x", 64<<10))
			var err error
			for i := 0; i < 4096 && err == nil; i++ { // 256 MiB at most: far over any socket buffer
				_, err = w.Write(chunk)
			}
			results <- result{err, time.Now()}
		default:
			echoPath(w, r)
		}
	}), func(s *Server) {
		s.ReadTimeout = timeout
		s.WriteTimeout = timeout
	})
	parked := make(chan struct{}, 8)
	ts.ln.SetOnPark(func() { parked <- struct{}{} })
	for _, tc := range []struct {
		name, req string
		park      bool
	}{
		{"slow body, kept alive", "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab", false},
		{"slow body, after parking", "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab", true},
		{"unread answer, kept alive", "GET /write HTTP/1.1\r\nHost: x\r\n\r\n", false},
		{"unread answer, after parking", "GET /write HTTP/1.1\r\nHost: x\r\n\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := ts.dial(t)
			for i := 0; i < 3; i++ { // a few requests first: the deadlines are set, and kept
				cl.send("GET /one HTTP/1.1\r\nHost: x\r\n\r\n")
				if _, body := cl.response("GET"); body != "GET /one" {
					t.Fatalf("got %q", body)
				}
			}
			if tc.park {
				select {
				case <-parked:
				case <-time.After(10 * time.Second):
					t.Fatal("not parked")
				}
			} else {
				// a pause, not a wait for anything: shorter than the
				// 250 ms after which the connection parks, longer than
				// the write deadline's slack (timeout/8), so that the
				// last request's write deadline is too early for the next
				time.Sleep(200 * time.Millisecond)
			}
			start := time.Now()
			cl.send(tc.req)
			var r result
			select {
			case r = <-results:
			case <-time.After(10 * time.Second):
				t.Fatal("the request did not time out")
			}
			if !errors.Is(r.err, os.ErrDeadlineExceeded) {
				t.Fatalf("handler's error %v, want a deadline", r.err)
			}
			// the deadline counts from the request's head: not before
			// the timeout, and not much after it (d + d/8 for writes)
			if el := r.at.Sub(start); el < timeout-50*time.Millisecond {
				t.Fatalf("timed out after %v, before the %v timeout", el, timeout)
			}
		})
	}
}
