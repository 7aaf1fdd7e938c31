package gateway

import (
	"errors"
	"net"
	"sync/atomic"
)

// countingConn counts the bytes written to a connection, so that a failed
// attempt knows whether any of its request left. For the h1 client it also
// bounds what a response head may read (readLeft, unbounded when < 0; only
// the goroutine reading the response touches it).
type countingConn struct {
	net.Conn
	written  atomic.Int64
	readLeft int64
}

// maxResponseHead bounds the bytes read for one response head, interim
// 1xx answers included (http.Transport's MaxResponseHeaderBytes, set to
// the same in newTransport).
const maxResponseHead = 1 << 20

// errHeadTooLarge: a response head went over maxResponseHead.
var errHeadTooLarge = errors.New("gateway: upstream response head too large")

func (c *countingConn) Read(b []byte) (int, error) {
	if c.readLeft >= 0 {
		if c.readLeft == 0 {
			return 0, errHeadTooLarge
		}
		if int64(len(b)) > c.readLeft {
			b = b[:c.readLeft]
		}
	}
	n, err := c.Conn.Read(b)
	if c.readLeft >= 0 {
		c.readLeft -= int64(n)
	}
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	return n, err
}
