package breaker

import (
	"net/http"

	"github.com/veerhq/veer/outcome"
)

// Transport is an http.RoundTripper that sends each request through a
// Breaker (and, if set, a Throttle) and reports the classified outcome
// (outcome.Classify) to them. A rejected request is not sent; its error
// wraps ErrOpen, ErrDegraded or ErrThrottled inside an *outcome.Error of
// kind Overloaded, so callers and outcome.ClassifyError treat it as a shed
// request (safe to retry elsewhere: it never left the client).
//
// Use one Transport per dependency (host or cluster): a breaker guards one
// thing.
type Transport struct {
	// Next sends admitted requests; nil means http.DefaultTransport.
	Next http.RoundTripper
	// Breaker guards the dependency; nil means none.
	Breaker *Breaker
	// Throttle adds client-side adaptive throttling; nil means none.
	Throttle *Throttle
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	var doneB, doneT func(outcome.Outcome)
	if t.Throttle != nil {
		d, err := t.Throttle.Allow()
		if err != nil {
			closeBody(req)
			return nil, outcome.Wrap(outcome.Overloaded, err)
		}
		doneT = d
	}
	if t.Breaker != nil {
		d, err := t.Breaker.Allow()
		if err != nil {
			if doneT != nil {
				// Not sent: neither an accept nor a rejection by the backend.
				doneT(outcome.Of(outcome.ClientCanceled))
			}
			closeBody(req)
			return nil, outcome.Wrap(outcome.Overloaded, err)
		}
		doneB = d
	}
	resp, err := next.RoundTrip(req)
	o := outcome.Classify(resp, err)
	if doneB != nil {
		doneB(o)
	}
	if doneT != nil {
		doneT(o)
	}
	return resp, err
}

// closeBody honours the RoundTripper contract: the request body is closed
// even when the request is not sent.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
