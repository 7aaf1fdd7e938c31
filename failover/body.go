package failover

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/outcome"
)

// watchedBody reports to the policy how the reading of a response body
// ended. The first read error other than io.EOF before the caller closes
// the body is a failure of the request (a connection reset or a timeout
// mid-body), although its headers arrived. When the headers' success has to
// be reported (it may change the state), it is reported when the body ends:
// at io.EOF, or when the caller closes it; a body that fails is reported as
// a failure instead, never both.
type watchedBody struct {
	io.ReadCloser
	t       *Transport
	domain  int
	success bool            // report ok at the end
	ok      outcome.Outcome // the headers' outcome
	done    atomic.Bool     // reported, or closed by the caller
}

// watchBody wraps resp.Body (one allocation) unless there is no body to
// read or the connection was handed over (101 Switching Protocols, whose
// body is also a writer). With success, the headers' outcome o is reported
// when the body ends.
func (t *Transport) watchBody(resp *http.Response, domain int, success bool, o outcome.Outcome) *http.Response {
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols {
		return resp
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, t: t, domain: domain, success: success, ok: o}
	return resp
}

// Read implements io.Reader.
func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		if b.success && b.done.CompareAndSwap(false, true) {
			b.t.report(b.domain, b.ok)
		}
	case b.done.CompareAndSwap(false, true):
		o := outcome.Outcome{Kind: outcome.ClassifyError(err), Err: err}
		if o.Kind.Network() { // not the caller's own cancellation
			b.t.report(b.domain, o)
		}
	}
	return n, err
}

// Close implements io.Closer. Errors of reads after (or racing with) Close
// are the caller's doing and are not reported; a pending success is.
func (b *watchedBody) Close() error {
	if b.done.CompareAndSwap(false, true) && b.success {
		b.t.report(b.domain, b.ok)
	}
	return b.ReadCloser.Close()
}

// report feeds the outcome of a regular request sent to domain.
func (t *Transport) report(domain int, o outcome.Outcome) {
	t.step(func(now time.Time) Action { return t.policy.Report(now, domain, o) })
}
