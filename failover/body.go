package failover

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/outcome"
)

// watchedBody reports to the policy the first error (other than io.EOF)
// that a read of a response body returns before the caller closes it: a
// connection reset or a timeout mid-body is a network failure of the
// request, although its headers arrived.
type watchedBody struct {
	io.ReadCloser
	t      *Transport
	domain int
	done   atomic.Bool // closed by the caller, or already reported
}

// watchBody wraps resp.Body (one allocation) unless there is no body to
// read or the connection was handed over (101 Switching Protocols, whose
// body is also a writer).
func (t *Transport) watchBody(resp *http.Response, domain int) *http.Response {
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols {
		return resp
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, t: t, domain: domain}
	return resp
}

// Read implements io.Reader.
func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && b.done.CompareAndSwap(false, true) {
		b.t.bodyFailed(b.domain, err)
	}
	return n, err
}

// Close implements io.Closer. Errors of reads after (or racing with) Close
// are the caller's doing and are not reported.
func (b *watchedBody) Close() error {
	b.done.Store(true)
	return b.ReadCloser.Close()
}

// bodyFailed reports a body read error of a request sent to domain.
func (t *Transport) bodyFailed(domain int, err error) {
	o := outcome.Outcome{Kind: outcome.ClassifyError(err), Err: err}
	if !o.Kind.Network() {
		return // the caller's own cancellation says nothing about the domain
	}
	t.step(func(now time.Time) Action { return t.policy.Report(now, domain, o) })
}
