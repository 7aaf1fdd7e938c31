package retry

import (
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/outcome"
)

// Transport is an http.RoundTripper that retries through a Retrier. A
// request is resent only if its body can be replayed (no body, or
// Request.GetBody set, as http.NewRequest does for in-memory bodies) and the
// safety rule allows it: it never reached the upstream, or its method is
// idempotent, or it carries an Idempotency-Key. A response that is going to
// be retried is drained (up to 64 KiB) and closed before the wait, so its
// connection returns to the pool.
type Transport struct {
	// Next sends each attempt; nil means http.DefaultTransport.
	Next http.RoundTripper
	// Retrier applies the policy; default New(Config{}, Options{}).
	Retrier *Retrier
}

var _ http.RoundTripper = (*Transport)(nil)

// ErrNoReplay marks a failed attempt whose body could not be replayed.
var ErrNoReplay = errors.New("retry: request body cannot be replayed (no GetBody)")

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	r := t.Retrier
	if r == nil {
		r = defaultRetrier()
	}
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	call := r.Start(Idempotent(req.Method, req.Header))
	ctx := req.Context()
	attempt := req
	for {
		resp, err := next.RoundTrip(attempt)
		o := outcome.ClassifyAt(resp, err, r.clk.Now())
		if o.OK() || !replayable {
			_, _ = call.Next(o)
			return resp, err
		}
		wait, stop := call.Next(o)
		if stop != nil {
			return resp, err
		}
		if resp != nil {
			_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
			resp.Body.Close()
		}
		if err := Sleep(ctx, r.clk, wait); err != nil {
			return nil, err
		}
		attempt = req.Clone(ctx)
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, errors.Join(ErrNoReplay, err)
			}
			attempt.Body = body
		}
	}
}

var defaultRetrier = sync.OnceValue(func() *Retrier {
	r, err := New(Config{}, Options{Clock: clock.Real})
	if err != nil {
		panic(err) // the zero Config is valid
	}
	return r
})
