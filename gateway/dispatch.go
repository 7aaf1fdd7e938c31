package gateway

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/veerhq/veer/gateway/internal/h1"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/retry"
)

// Dispatcher sends a routed request upstream and returns the response to
// relay. The gateway's own dispatcher picks a cluster and a backend per
// attempt and retries across clusters; a later async dispatcher (a durable
// queue in front of the same clusters) plugs in here.
//
// RoundTrip follows http.RoundTripper's contract; the request's context
// carries the route (see RouteName).
type Dispatcher = http.RoundTripper

// dispatchError is returned when no attempt produced a response to relay.
type dispatchError struct{ o outcome.Outcome }

func (e *dispatchError) Error() string { return "gateway: " + e.o.String() }
func (e *dispatchError) Unwrap() error { return e.o.Err }

// MaxRouteClusters bounds the clusters of one route: the dispatcher keeps
// the clusters an attempt has tried in one 64-bit set (and their weighted
// shares on the stack), and Validate refuses a route with more.
const MaxRouteClusters = 64

// errNoBackend: every backend of the cluster is drained.
var errNoBackend = errors.New("gateway: no backend available (all drained)")

// reqState is the per-request state the handler hands the dispatcher. It
// is written on the request's own goroutine only: the handler fills the
// inputs before dispatch, RoundTrip stores what the attempts returned. The
// attempts read the inputs and return a result value; a load that runs
// detached from its caller (stale-on-error) works on a copy of the inputs
// (see loadInput), so a caller that gave up never sees it.
type reqState struct {
	input
	res     result
	stale   bool
	hop     hop
	trusted bool // the caller is in trusted_networks
}

// input is what the attempts of one request read; nothing writes it once
// dispatch has begun.
type input struct {
	snap       *table
	route      *route
	body       []byte // buffered body for replay; nil when none or too big
	replayable bool
	idempotent bool
	trailer    bool     // the buffered body came with trailers: resend it chunked, with them
	pin        int      // a rollout's cluster (index+1) for every attempt; 0: the route's policy
	fwd        *interim // where the 1xx answers of http.Transport attempts go; nil: dropped
	// extra: the header fields the relay sets, not in the request's header
	// map (the own HTTP/1.1 client writes them after it; withExtra merges
	// them for any other transport); upgrade: the request asks to switch
	// protocols (its Upgrade is among them)
	extra   []h1.Field
	upgrade bool
}

// result is what the attempts of one dispatch did, for the access log and
// the span: how many attempts, and the cluster and backend of the last.
type result struct {
	attempts int
	cluster  string
	backend  string
}

type stateKey struct{}

func stateFrom(ctx context.Context) *reqState {
	s, _ := ctx.Value(stateKey{}).(*reqState)
	return s
}

// RouteName returns the name of the route a request under dispatch
// matched, "" outside the gateway.
func RouteName(ctx context.Context) string {
	if s := stateFrom(ctx); s != nil {
		return s.route.cfg.Name
	}
	return ""
}

// dispatcher is the gateway's Dispatcher.
type dispatcher struct {
	g    *Gateway
	rngs sync.Pool
}

func (d *dispatcher) rng() *rand.Rand {
	if r, ok := d.rngs.Get().(*rand.Rand); ok {
		return r
	}
	return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

// RoundTrip implements http.RoundTripper for requests prepared by the
// gateway's handler.
func (d *dispatcher) RoundTrip(req *http.Request) (*http.Response, error) {
	st := stateFrom(req.Context())
	if st == nil {
		return nil, errors.New("gateway: request not routed")
	}
	var resp *http.Response
	var err error
	start := time.Now()
	pin, ver, sc := d.g.pinRelease(req, st.route)
	st.pin = pin
	if sc != nil {
		defer func() {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			sc.record(ver, status, err, time.Since(start))
		}()
	}
	if c := st.route.cache; c != nil && req.Method == http.MethodGet && !st.upgrade {
		resp, st.res, st.stale, err = d.cached(req, &st.input)
	} else {
		resp, st.res, err = d.attempts(req, &st.input)
	}
	return resp, err
}

// attempts runs the attempts of one request: the first to the route's
// preferred cluster, retries to the other clusters while retry allows. It
// reads st and writes nothing shared: what it did comes back as a result.
func (d *dispatcher) attempts(req *http.Request, st *input) (resp *http.Response, res result, err error) {
	rnd := d.rng()
	defer d.rngs.Put(rnd)
	rt := st.route
	upgrade := st.upgrade
	var call *retry.Call
	if !st.snap.cfg.Retry.Disabled && !upgrade && st.replayable {
		call = st.snap.retrier.Start(st.idempotent)
	}
	now := time.Now()
	deadline := now.Add(rt.cfg.Timeout)
	var base uint64 // clusters not to use: all but a rollout's
	if st.pin > 0 {
		base = (1<<uint(len(rt.clusters)) - 1) &^ (1 << uint(st.pin-1))
	}
	tried := base
	var last *backend // avoided by the next attempt when its cluster has another
	for ; ; now = time.Now() {
		ci := rt.pickCluster(now.UnixNano(), tried, rnd)
		if ci < 0 {
			return nil, res, &dispatchError{outcome.Outcome{Kind: outcome.Overloaded, Err: errNoBackend}}
		}
		tried |= 1 << uint(ci)
		c := rt.clusters[ci]
		tryFor := time.Until(deadline)
		switch {
		case rt.cfg.TryTimeout > 0:
			tryFor = min(rt.cfg.TryTimeout, tryFor)
		case call != nil && st.idempotent:
			tryFor = rt.lat.TryTimeout(now, tryFor)
		}
		resp, o, b := d.try(req, st, res.attempts, last, c, now, tryFor, upgrade, rnd)
		res.attempts++
		res.cluster, res.backend = c.cfg.Name, ""
		if b != nil {
			last, res.backend = b, b.addr
		}
		if res.attempts > 1 {
			rt.m.retries.Inc()
		}
		if o.OK() || call == nil || req.Context().Err() != nil {
			resp, err = relay(resp, o)
			return resp, res, err
		}
		wait, err := call.Next(o)
		if err != nil || time.Until(deadline) <= wait {
			resp, err = relay(resp, o)
			return resp, res, err
		}
		if resp != nil {
			discard(resp)
		}
		if tried == 1<<uint(len(rt.clusters))-1 {
			tried = base // every cluster tried: any may take the next attempt, after the backoff
		} else {
			wait = 0 // the next attempt goes to a cluster not tried yet: no reason to wait
		}
		if err := retry.Sleep(req.Context(), nil, wait); err != nil {
			return nil, res, &dispatchError{outcome.Outcome{Kind: outcome.ClientCanceled, Err: err}}
		}
	}
}

// relay turns an attempt's result into RoundTrip's.
func relay(resp *http.Response, o outcome.Outcome) (*http.Response, error) {
	if resp != nil {
		return resp, nil
	}
	return nil, &dispatchError{o}
}

// pickCluster returns the index of the cluster for the next attempt,
// skipping clusters in tried. Ordered routes take the first cluster whose
// share (availability and return ramp) admits the draw; weighted routes
// draw by weight × share. When no untried cluster has a share, the first
// untried cluster that is not drained is used (its backends in panic
// mode); -1 when every untried cluster is drained.
func (r *route) pickCluster(now int64, tried uint64, rnd *rand.Rand) int {
	if len(r.clusters) == 1 {
		if r.clusters[0].state.drained.Load() {
			return -1
		}
		return 0
	}
	stallAfter := r.lat.StallAfter(now)
	if !r.weighted {
		for i, c := range r.clusters {
			if tried&(1<<uint(i)) != 0 {
				continue
			}
			if s := c.share(now, stallAfter); s >= 1 || (s > 0 && rnd.Float64() < s) {
				return i
			}
		}
	} else {
		var total float64
		var shares [MaxRouteClusters]float64
		for i, c := range r.clusters {
			if tried&(1<<uint(i)) == 0 {
				shares[i] = float64(r.weights[i]) * c.share(now, stallAfter)
				total += shares[i]
			}
		}
		if total > 0 {
			x := rnd.Float64() * total
			for i := range r.clusters {
				if x < shares[i] {
					return i
				}
				x -= shares[i]
			}
		}
	}
	// nothing available: the best untried cluster not drained
	best, bestShare := -1, -1.0
	for i, c := range r.clusters {
		if tried&(1<<uint(i)) != 0 || c.state.drained.Load() {
			continue
		}
		if s := c.usableShare(now); s > bestShare {
			best, bestShare = i, s
		}
	}
	if best >= 0 {
		return best
	}
	return -1
}
