package h1

import (
	"net/http"
	"net/http/httptrace"
)

// writeWatch tells whether an attempt through http.Transport wrote any
// byte of its request: the connection it got (httptrace GotConn) counts
// its writes (countingConn). Attached only to requests that are not
// idempotent, the only ones for which it changes the retry decision; the
// gateway's own HTTP/1.1 client reports errUnwritten itself.
type WriteWatch struct {
	Req    *http.Request // the request with the trace attached: send this one
	conn   *countingConn
	before int64
}

// watchWrites returns a watch whose req is out with the trace attached.
func WatchWrites(out *http.Request) *WriteWatch {
	w := &WriteWatch{}
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if c, ok := info.Conn.(*countingConn); ok {
			w.conn, w.before = c, c.written.Load()
		}
	}}
	w.Req = out.WithContext(httptrace.WithClientTrace(out.Context(), trace))
	return w
}

// unwritten reports whether the attempt got a connection and wrote nothing
// to it. A connection shared by other requests (HTTP/2) that wrote in the
// meantime reads as written: the safe answer.
func (w *WriteWatch) Unwritten() bool {
	return w != nil && w.conn != nil && w.conn.written.Load() == w.before
}
