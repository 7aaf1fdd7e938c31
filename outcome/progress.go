package outcome

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// Progress records how far one HTTP attempt got, through net/http/httptrace.
// net/http reports a context deadline that passes while it waits for a
// connection exactly as one that passes while it waits for response headers
// (context.DeadlineExceeded); Progress tells them apart, and tells a retry
// policy whether the request was ever written to a connection.
type Progress struct {
	connected atomic.Bool
	wrote     atomic.Bool
}

// WithProgress returns a context that records the attempt's progress into
// the returned Progress. It composes with any ClientTrace already in ctx.
func WithProgress(ctx context.Context) (context.Context, *Progress) {
	p := new(Progress)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { p.connected.Store(true) },
		WroteRequest: func(httptrace.WroteRequestInfo) { p.wrote.Store(true) },
	}), p
}

// Connected reports whether the attempt obtained a connection.
func (p *Progress) Connected() bool { return p.connected.Load() }

// Wrote reports whether the request was written to a connection.
func (p *Progress) Wrote() bool { return p.wrote.Load() }

// ClassifyProgress is ClassifyAt refined by p: a deadline that passed before
// a connection was obtained is DialCanceled, not ResponseTimeout.
func ClassifyProgress(resp *http.Response, err error, p *Progress, now time.Time) Outcome {
	o := ClassifyAt(resp, err, now)
	if p != nil && o.Kind == ResponseTimeout && !p.Connected() {
		o.Kind = DialCanceled
	}
	return o
}
