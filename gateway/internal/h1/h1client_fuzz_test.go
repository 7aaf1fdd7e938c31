package h1

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// byteConn is a net.Conn that reads a fixed byte string and discards what
// is written: the fuzz target's upstream.
type byteConn struct{ r *bytes.Reader }

func (c byteConn) Read(b []byte) (int, error)     { return c.r.Read(b) }
func (byteConn) Write(b []byte) (int, error)      { return len(b), nil }
func (byteConn) Close() error                     { return nil }
func (byteConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (byteConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (byteConn) SetDeadline(time.Time) error      { return nil }
func (byteConn) SetReadDeadline(time.Time) error  { return nil }
func (byteConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzH1Response feeds arbitrary bytes as an upstream's answer to the
// client's response reading: it never panics, a body read ends, and a
// connection goes back to the pool only when its answer ended cleanly and
// did not ask to close.
func FuzzH1Response(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n3\r\nabc\r\n0\r\nX-T: v\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nrest",
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, head bool) {
		cl := &Client{maxIdle: 1}
		p := cl.pool("x")
		cc := &countingConn{Conn: byteConn{bytes.NewReader(data)}, readLeft: -1}
		pc := &h1Conn{c: cc, br: bufio.NewReader(cc), bw: bufio.NewWriter(cc), t: cl, pool: p}
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		req, _ := http.NewRequest(method, "http://x/", nil)
		resp, _, err := pc.roundTrip(req, nil, time.Time{}, time.Time{}, false)
		if err != nil {
			if len(p.idle) != 0 {
				t.Fatal("connection pooled after a failed exchange")
			}
			return
		}
		_, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, int64(len(data))+1))
		resp.Body.Close()
		if len(p.idle) != 0 && (rerr != nil || resp.Close) {
			t.Fatalf("connection pooled after body error %v / close %v", rerr, resp.Close)
		}
	})
}
