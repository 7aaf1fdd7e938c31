package h1

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
)

// DialFunc connects to a backend (net.Dialer.DialContext's shape).
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// CountWrites returns dial with every connection counting the bytes
// written to it, for an http.Transport's DialContext: WatchWrites reads
// the count. The Client counts its own connections.
func CountWrites(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, readLeft: -1}, nil
	}
}

// countingConn counts the bytes written to a connection, so that a failed
// attempt knows whether any of its request left. For the h1 client it also
// bounds what a response head may read (readLeft, unbounded when < 0; only
// the goroutine reading the response touches it).
type countingConn struct {
	net.Conn
	written  atomic.Int64
	readLeft int64
	// late is the h1 client's exchange whose cancellation is not armed
	// yet: a read or write that fails is handed to its arm, and retried
	// when it armed it (only the exchange's goroutine touches it)
	late *h1Conn
}

// maxResponseHead bounds the bytes read for one response head, interim
// 1xx answers included (http.Transport's MaxResponseHeaderBytes, set to
// the same by the gateway's transports).
const MaxResponseHead = 1 << 20

// errHeadTooLarge: a response head went over maxResponseHead.
var ErrHeadTooLarge = errors.New("gateway: upstream response head too large")

func (c *countingConn) Read(b []byte) (int, error) {
	if c.readLeft >= 0 {
		if c.readLeft == 0 {
			return 0, ErrHeadTooLarge
		}
		if int64(len(b)) > c.readLeft {
			b = b[:c.readLeft]
		}
	}
	n, err := c.Conn.Read(b)
	for n == 0 && err != nil && c.late != nil && c.late.arm(err) {
		n, err = c.Conn.Read(b)
	}
	if c.readLeft >= 0 {
		c.readLeft -= int64(n)
	}
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	for err != nil && c.late != nil && c.late.arm(err) {
		var m int
		m, err = c.Conn.Write(b[n:])
		c.written.Add(int64(m))
		n += m
	}
	return n, err
}
