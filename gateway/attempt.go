package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/gateway/internal/h1"
	"github.com/veerhq/veer/outcome"
)

// try makes attempt number n (from 0) on cluster c, avoiding the backend
// last when c has another; it returns the backend it picked (nil if none).
// Its steps, each a function below, in this order:
//
//  1. admit: the cluster's breaker lets the attempt through, or refuses it;
//  2. pickFor: a backend of c (least outstanding of two, last avoided);
//  3. target: the request for this backend (a clone after the first
//     attempt, the buffered body replayed);
//  4. begin, send: the attempt counted outstanding on the backend, then
//     sent through one of three transport modes (an upgrade; the own
//     HTTP/1.1 client with the attempt's deadline on its connection;
//     http.Transport under a timer), with a write watch when the request
//     is not idempotent;
//  5. classify: the outcome, with the route's latency and the backend's
//     liveness observed;
//  6. judge: the backend's counters and outlier detector see the outcome
//     (and then the breaker, through admit's done);
//  7. release: the backend's outstanding count drops now (no response, an
//     upgrade) or when the relayed body is closed.
func (d *dispatcher) try(req *http.Request, st *input, n int, last *backend, c *cluster, now time.Time, tryFor time.Duration, upgrade bool, rnd *rand.Rand) (*http.Response, outcome.Outcome, *backend) {
	done, refused := d.admit(c)
	if refused != nil {
		return nil, *refused, nil
	}
	b := c.pickFor(now, rnd, last)
	if b == nil {
		if done != nil {
			done(outcome.Of(outcome.Success)) // not the cluster's fault
		}
		return nil, outcome.Outcome{Kind: outcome.Overloaded, Err: errNoBackend}, nil
	}
	out := target(req, st, n, c, b)
	b.begin(now)
	a := send(c, out, st.extra, st.idempotent, upgrade, now, tryFor, st.fwd)
	o := a.classify(req, st.route, b, now)
	d.judge(c, b, o, a.end)
	if done != nil {
		done(o)
	}
	return a.release(b, upgrade), o, b
}

// admit asks c's breaker for the attempt: done reports its outcome (nil
// when breakers are off); refused is the outcome when the breaker is open.
func (d *dispatcher) admit(c *cluster) (done func(outcome.Outcome), refused *outcome.Outcome) {
	if c.breaker == nil {
		return nil, nil
	}
	done, err := c.breaker.Allow()
	if err != nil {
		d.g.m.rejected.WithLabelValues("breaker").Inc()
		return nil, &outcome.Outcome{Kind: outcome.Overloaded, RetryAfter: c.breaker.RetryAfter(), Err: err}
	}
	return done, nil
}

// pickFor picks the attempt's backend (see pick), counting panic mode;
// nil when every backend is drained.
func (c *cluster) pickFor(now time.Time, rnd *rand.Rand, last *backend) *backend {
	b, panicked := c.pick(now.UnixNano(), rnd, last)
	if panicked {
		c.m.panics.Inc()
	}
	return b
}

// target returns the request of attempt n for backend b of c: req itself
// on the first attempt, a clone after it, with the buffered body (if any)
// set to be read from its start.
func target(req *http.Request, st *input, n int, c *cluster, b *backend) *http.Request {
	out := req
	if n > 0 {
		out = req.Clone(req.Context())
	}
	out.URL.Scheme = c.scheme()
	out.URL.Host = b.addr
	if st.body != nil {
		out.Body = io.NopCloser(bytes.NewReader(st.body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(st.body)), nil }
		out.ContentLength = st.bodyLength()
	}
	return out
}

// begin counts an attempt outstanding on b from now.
func (b *backend) begin(now time.Time) {
	if b.outstanding.Add(1) == 1 {
		b.busySince.Store(now.UnixNano())
	}
}

// sent is what one attempt's send returned.
type sent struct {
	resp     *http.Response
	err      error
	timedOut bool               // the attempt's own timeout ended it
	watch    *h1.WriteWatch     // nil: none (see send)
	cancel   context.CancelFunc // ends the attempt's context (http.Transport mode)
	end      time.Time
}

// send sends out through c's transport in one of three modes: an upgrade
// without a timeout (the connection outlives the attempt); the own
// HTTP/1.1 client, with the attempt's deadline on its connection (no timer,
// no derived context); or http.Transport under a context a timer cancels
// after tryFor. A request that is not idempotent and not sent by the own
// client (which reports h1.ErrUnwritten itself) carries a write watch, so
// that a failure can tell whether any of it left. The attempts through
// http.Transport forward their 1xx answers to fwd (when not nil); the own
// client skips them. The relay's extra header fields go to the own client
// beside the request; every other mode gets a request with them in its
// header map (withExtra).
func send(c *cluster, out *http.Request, extra []h1.Field, idempotent, upgrade bool, now time.Time, tryFor time.Duration, fwd *interim) sent {
	a := sent{cancel: func() {}}
	own, _ := c.transport.(*h1.Client)
	if own != nil && (upgrade || !own.Handles(out)) {
		own = nil
	}
	if own == nil {
		out = withExtra(out, extra) // a header map with every field to send
	}
	var w *h1.WriteWatch
	if !idempotent && own == nil {
		w = h1.WatchWrites(out)
		out = w.Req
	}
	switch {
	case upgrade:
		if fwd != nil {
			out = out.WithContext(fwd.attach(out.Context()))
		}
		a.resp, a.err = c.transport.RoundTrip(out)
	case own != nil:
		a.resp, a.err = own.RoundTripAt(out, extra, now, now.Add(tryFor))
		a.timedOut = errors.Is(a.err, h1.ErrTryTimeout)
	default:
		var timedOut atomic.Bool
		ctx, cancel := context.WithCancel(fwd.attach(out.Context()))
		t := time.AfterFunc(tryFor, func() { timedOut.Store(true); cancel() })
		a.resp, a.err = c.transport.RoundTrip(out.WithContext(ctx))
		t.Stop()
		a.timedOut, a.cancel = timedOut.Load(), cancel
	}
	a.end = time.Now()
	a.watch = w
	return a
}

// classify returns the attempt's outcome (its own timeout and the
// client's cancel told apart from the network's errors) after feeding the
// route's latency tracker and b's liveness: an answer and a prompt error
// show b is not frozen; a timeout counts against the route's try timeout.
func (a *sent) classify(req *http.Request, r *route, b *backend, start time.Time) outcome.Outcome {
	switch {
	case a.resp != nil:
		r.lat.Observe(a.end, a.end.Sub(start))
		b.lastDone.Store(a.end.UnixNano())
	case a.timedOut:
		r.lat.ObserveTimeout(a.end)
	case req.Context().Err() == nil:
		b.lastDone.Store(a.end.UnixNano()) // a prompt error: not frozen
	}
	o := outcome.ClassifyAt(a.resp, a.err, a.end)
	switch {
	case a.err != nil && a.timedOut:
		o = outcome.Outcome{Kind: outcome.ResponseTimeout, Err: a.err}
	case a.err != nil && req.Context().Err() != nil:
		o = outcome.Outcome{Kind: outcome.ClientCanceled, Err: a.err}
	case errors.Is(a.err, h1.ErrInvalidRequest):
		// the own client refused to write it (a CR, LF or NUL in a field):
		// the request's fault, not the backend's (400)
		o = outcome.Outcome{Kind: outcome.ClientError, Err: a.err}
	}
	if a.err != nil && (errors.Is(a.err, h1.ErrUnwritten) || a.watch.Unwritten()) {
		o.Unwritten = true // nothing of it left: a retry is safe for any method
	}
	return o
}

// judge counts the outcome on b and lets its outlier detector eject it,
// within c's ejection cap.
func (d *dispatcher) judge(c *cluster, b *backend, o outcome.Outcome, end time.Time) {
	b.attempts[o.Kind].Inc()
	if ej := b.observe(end, o, &c.cfg.Outlier, func() bool { return c.mayEject(end.UnixNano()) }); ej > 0 {
		d.g.m.ejections.WithLabelValues(c.cfg.Name, b.addr).Inc()
		d.g.log.Warn("backend ejected", "cluster", c.cfg.Name, "backend", b.addr, "for", ej, "outcome", o.Kind.String())
	}
}

// release ends the attempt on b now when there is no body to relay (no
// response, an upgrade, a 101), or else when the relayed body is closed;
// it returns the response to relay.
func (a *sent) release(b *backend, upgrade bool) *http.Response {
	resp := a.resp
	if resp == nil || upgrade || resp.StatusCode == http.StatusSwitchingProtocols {
		b.outstanding.Add(-1)
		if resp == nil {
			a.cancel()
		}
		return resp
	}
	resp.Body = &releaseBody{ReadCloser: resp.Body, b: b, cancel: a.cancel}
	return resp
}

func (c *cluster) scheme() string {
	if c.cfg.Protocol == "h2" {
		return "https"
	}
	return "http"
}

// releaseBody ends its attempt once, when the body is closed: the
// backend's outstanding count drops and the attempt's context is
// cancelled.
type releaseBody struct {
	io.ReadCloser
	once   sync.Once
	b      *backend
	cancel context.CancelFunc
}

func (r *releaseBody) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(r.release)
	return err
}

func (r *releaseBody) release() {
	r.b.outstanding.Add(-1)
	r.cancel()
}

// discard drains a little of a response that will not be relayed, so that
// its connection can be reused, and closes it.
func discard(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	_ = resp.Body.Close()
}
