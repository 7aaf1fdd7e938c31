package shed

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/veerhq/veer/outcome"
)

// ReasonHeader names the header that every HTTP rejection carries with its
// Reason ("overload", "tier", "queue_full", "deadline"), so that a proxy
// or a client can tell a deadline drop (the request could not start before
// its caller's deadline: retrying it with the same budget is pointless)
// from plain overload without reading the body.
const ReasonHeader = "Veer-Shed-Reason"

// maxDrain is the largest unread request body a rejection leaves for
// net/http to read and discard (so that the HTTP/1.1 connection can be
// reused). A larger or unknown-length body gets "Connection: close"
// instead: a rejection must stay cheap, and reading a megabyte to refuse
// it is not.
const maxDrain = 4 << 10

// rejectWire is the HTTP form of one rejection, built once per policy by
// running outcome.WriteHTTP (the one place an outcome becomes a rejection on
// the wire) into a capturing writer: writing it costs header map
// assignments and one Write, and allocates nothing of its own. The header
// values are shared by every response, each a slice of one element with no
// spare capacity (an Add by a wrapping handler copies it rather than
// writing into it); nothing may modify them in place.
type rejectWire struct {
	status int
	keys   []string   // canonical header keys
	vals   [][]string // their values, shared
	body   []byte
}

var connClose = []string{"close"}

// newRejectWire builds the wire form of a rejection for reason r.
func newRejectWire(p *policy, r Reason) rejectWire {
	var c captureWriter
	c.h = http.Header{}
	outcome.WriteHTTP(&c, outcome.Outcome{Kind: outcome.Overloaded, RetryAfter: p.retryAfter}, r.String())
	c.h.Set(ReasonHeader, r.String())
	c.h.Set("Content-Length", strconv.Itoa(c.body.Len()))
	rw := rejectWire{status: c.status, body: bytes.Clone(c.body.Bytes())}
	for _, k := range sortedKeys(c.h) {
		rw.keys = append(rw.keys, k)
		rw.vals = append(rw.vals, c.h[k][:len(c.h[k]):len(c.h[k])])
	}
	return rw
}

// write sends the rejection. A request body that net/http would have to
// read and discard to keep the connection (more than maxDrain bytes, or of
// unknown length) closes the HTTP/1.x connection instead.
func (rw *rejectWire) write(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	for i, k := range rw.keys {
		h[k] = rw.vals[i]
	}
	if r != nil && r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody &&
		(r.ContentLength < 0 || r.ContentLength > maxDrain) {
		h["Connection"] = connClose
	}
	w.WriteHeader(rw.status)
	_, _ = w.Write(rw.body)
}

// captureWriter records what outcome.WriteHTTP writes.
type captureWriter struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (c *captureWriter) Header() http.Header { return c.h }
func (c *captureWriter) WriteHeader(s int) {
	if c.status == 0 {
		c.status = s
	}
}
func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(b)
}
