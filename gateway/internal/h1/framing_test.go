package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// TestFramerSteps feeds request streams through a framedConn and checks
// where each request ends and what the framer decided.
func TestFramerSteps(t *testing.T) {
	const get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tc := range []struct {
		name, in string
		ends     []int
		want     string // "" ok, "refuse", "malformed", "open"
		why      string
	}{
		{"one GET", get, []int{len(get)}, "", ""},
		{"bare LF", "GET / HTTP/1.1\nHost: x\n\n" + get, []int{24, 24 + len(get)}, "", ""},
		{"content-length body", "POST / HTTP/1.1\r\nHost: x\r\ncontent-LENGTH: 3\r\n\r\nabc" + get, []int{50, 50 + len(get)}, "", ""},
		{"POST then CRLF", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na\r\n" + get, []int{48, 50 + len(get)}, "", ""},
		{"chunked with trailer", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\n" + get,
			[]int{79, 79 + len(get)}, "", ""},
		{"both CL and TE", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", nil, "refuse", "both Transfer-Encoding and Content-Length"},
		{"identical duplicate CL", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na", nil, "refuse", "more than one Content-Length"},
		{"TE on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", nil, "refuse", "both Transfer-Encoding and Content-Length"},
		{"TE alone on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", nil, "refuse", "Transfer-Encoding on HTTP/1.0"},
		{"folded CL counts once", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n \r\n\r\na", []int{51}, "", ""},
		{"good then smuggled", get + "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd", []int{len(get)}, "refuse", "more than one Content-Length"},
		{"upgrade", "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nframes", []int{68}, "await", ""},
		{"h2c preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", nil, "open", ""},
		{"bad chunk line", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", nil, "malformed", ""},
		{"bare LF chunk line", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\na\r\n0\r\n\r\n", nil, "malformed", ""},
		{"garbage", "GARBAGE\r\n\r\n", nil, "malformed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, size := range []int{1, 3, 7, 256} {
				var ends []int
				var why string
				c := newFramedConn(&chunkConn{data: []byte(tc.in), sizes: []byte{byte(size - 1)}}, 4096, func(_ net.Conn, w string) { why = w })
				c.f.onEnd = func(e int64) { ends = append(ends, int(e)) }
				out, err := readAllSized(c, []byte{byte(size)})
				if err != nil {
					t.Fatalf("size %d: %v", size, err)
				}
				got := ""
				switch {
				case why != "":
					got = "refuse"
				case c.f.open():
					got = "open"
				case c.f.st == fAwait:
					got = "await"
				case c.f.st == fDead:
					got = "malformed"
				}
				if got != tc.want || why != tc.why || !equalInts(ends, tc.ends) {
					t.Fatalf("size %d: %q why %q ends %v, want %q why %q ends %v", size, got, why, ends, tc.want, tc.why, tc.ends)
				}
				wantOut := tc.in
				switch got {
				case "refuse":
					wantOut = tc.in[:lastOr(tc.ends, 0)] + refusedHead
				case "await": // the client closed before net/http decided: nothing after is served
					wantOut = tc.in[:lastOr(tc.ends, 0)]
				}
				if got == "malformed" && strings.HasPrefix(wantOut, string(out)) {
					wantOut = string(out) // the stream ends somewhere after the malformed byte
				}
				if string(out) != wantOut {
					t.Fatalf("size %d: delivered %q, want %q", size, out, wantOut)
				}
				if c.buf != nil {
					t.Fatalf("size %d: %d bytes still held at the end", size, len(c.buf))
				}
			}
		})
	}
}

// A read that times out while a head is partial keeps the bytes held, and
// an idle connection (between requests) holds no buffer.
func TestFramedConnTimeoutKeepsHeldBytes(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := newFramedConn(a, 4096, nil)
	go func() { _, _ = io.WriteString(b, "GET / HTTP/1.1\r\nHo") }()
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	p := make([]byte, 4096)
	n, err := c.Read(p)
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("partial head: %d %v, want a timeout", n, err)
	}
	if c.hi-c.lo != 18 {
		t.Fatalf("held %d bytes, want 18", c.hi-c.lo)
	}
	_ = c.SetReadDeadline(time.Time{})
	go func() { _, _ = io.WriteString(b, "st: x\r\n\r\n") }()
	n, err = c.Read(p)
	if err != nil || string(p[:n]) != "GET / HTTP/1.1\r\nHost: x\r\n\r\n" {
		t.Fatalf("after the timeout: %q %v", p[:n], err)
	}
	if c.buf != nil {
		t.Fatal("a buffer is held between requests")
	}
}

// FuzzFraming is differential: a stream of pipelined requests goes through
// net/http's own parser (http.ReadRequest and a body drain, with the
// server's POST CR/LF tolerance) and through a framedConn read in random
// pieces. For every request net/http accepts, both must end it at the same
// byte; a request the framer refuses must be one whose raw head has several
// Content-Length fields, Content-Length with Transfer-Encoding, or
// Transfer-Encoding on HTTP/1.0; and the framedConn delivers the stream
// unchanged up to there.
func FuzzFraming(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX: y\r\n\r\nGET / HTTP/1.1\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /s HTTP/1.1\r\n\r\n",
		"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
		"GET / HTTP/1.1\nHost: x\nX: a\n b\nContent-Length: 1\n\nzGET / HTTP/1.1\n\n",
		"GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\nGET / HTTP/1.1\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;ext\r\na\r\n10 \r\n0123456789abcdef\r\n0\r\n\r\n",
	} {
		f.Add([]byte(s), []byte{0, 5, 200, 3})
	}
	f.Fuzz(func(t *testing.T, stream, pattern []byte) {
		ref := referenceBoundaries(stream)
		var ends []int
		var why string
		c := newFramedConn(&chunkConn{data: stream, sizes: pattern}, http.DefaultMaxHeaderBytes, func(_ net.Conn, w string) { why = w })
		c.f.onEnd = func(e int64) { ends = append(ends, int(e)) }
		out, err := readAllSized(c, pattern)
		if err != nil {
			t.Fatal(err)
		}
		if len(ends) < len(ref.ends) || !equalInts(ends[:len(ref.ends)], ref.ends) {
			t.Fatalf("request ends: framer %v, net/http %v (stop: %s)", ends, ref.ends, ref.stop)
		}
		prefix := lastOr(ref.ends, 0)
		switch {
		case ref.stop == "refuse":
			if why == "" || string(out) != string(stream[:prefix])+refusedHead {
				t.Fatalf("net/http accepted a smuggling-shaped request %d; framer why %q delivered %q", len(ref.ends), why, out)
			}
		case ref.stop == "open":
			if why != "" || string(out) != string(stream) {
				t.Fatalf("h2c preface: framer why %q delivered %q", why, out)
			}
		case ref.stop == "await":
			if why != "" || string(out) != string(stream[:prefix]) {
				t.Fatalf("upgrade/CONNECT: framer why %q delivered %q, want the stream up to its end", why, out)
			}
		case why != "":
			// refused where net/http fails anyway: the prefix must be intact
			if !bytes.HasPrefix(out, stream[:prefix]) || len(ends) != len(ref.ends) {
				t.Fatalf("refused after %v, net/http failed after %v (%s)", ends, ref.ends, ref.stop)
			}
		default:
			if !bytes.HasPrefix(stream, out) || len(out) < prefix {
				t.Fatalf("delivered %d bytes %q, not a prefix of the stream reaching %d", len(out), out, prefix)
			}
		}
	})
}

type boundaries struct {
	ends []int
	stop string // "eof", "error", "refuse" (a smuggling shape), "open" (h2c), "await" (Upgrade, CONNECT)
}

// referenceBoundaries runs net/http's parser over stream as its server
// does, recording the offset where each accepted request ends.
func referenceBoundaries(stream []byte) boundaries {
	cr := &countReader{r: bytes.NewReader(stream)}
	br := bufio.NewReader(cr)
	var b boundaries
	post := false
	for {
		if post {
			peek, _ := br.Peek(4)
			n := 0
			for n < len(peek) && (peek[n] == '\r' || peek[n] == '\n') {
				n++
			}
			_, _ = br.Discard(n)
		}
		start := cr.n - br.Buffered()
		if start == len(stream) {
			b.stop = "eof"
			return b
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			b.stop = "error: " + err.Error()
			return b
		}
		if req.ProtoMajor != 1 {
			b.stop = "error: version"
			if req.Method == "PRI" {
				b.stop = "open"
			}
			return b
		}
		if smugglingShape(stream[start:]) {
			b.stop = "refuse"
			return b
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			b.stop = "error: body: " + err.Error()
			return b
		}
		b.ends = append(b.ends, cr.n-br.Buffered())
		if _, up := req.Header["Upgrade"]; up || req.Method == "CONNECT" {
			b.stop = "await" // what follows depends on whether the handler takes the connection over
			return b
		}
		post = req.Method == "POST"
	}
}

// smugglingShape reads a raw head with net/textproto, which keeps every
// field as sent (net/http later folds and removes some).
func smugglingShape(raw []byte) bool {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
	line, err := tp.ReadLine()
	if err != nil {
		return false
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return false
	}
	cl, te := len(h["Content-Length"]), len(h["Transfer-Encoding"])
	return cl > 1 || cl > 0 && te > 0 || te > 0 && strings.HasSuffix(line, " HTTP/1.0")
}

type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// chunkConn is a net.Conn that returns data in pieces whose sizes cycle
// through sizes (each 1 + byte).
type chunkConn struct {
	net.Conn
	data  []byte
	sizes []byte
	i     int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(p)
	if len(c.sizes) > 0 {
		n = min(n, 1+int(c.sizes[c.i%len(c.sizes)]))
		c.i++
	}
	n = copy(p, c.data[:min(n, len(c.data))])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunkConn) SetReadDeadline(time.Time) error { return nil }
func (c *chunkConn) Close() error                    { return nil }

// readAllSized reads r to its end with buffers whose sizes cycle through
// sizes (each 1 + byte, as net/http's 1-byte background reads and 4 KiB
// bufio fills mix).
func readAllSized(r io.Reader, sizes []byte) ([]byte, error) {
	var out []byte
	p := make([]byte, 4096)
	for i := 0; ; i++ {
		n := len(p)
		if len(sizes) > 0 {
			n = 1 + int(sizes[(i+1)%len(sizes)])*16
		}
		k, err := r.Read(p[:min(n, len(p))])
		out = append(out, p[:k]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if i > 1<<20 {
			return out, errors.New("no progress")
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func lastOr(s []int, d int) int {
	if len(s) == 0 {
		return d
	}
	return s[len(s)-1]
}
