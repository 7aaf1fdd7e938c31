// Package shed is criticality-aware load shedding after Uber's QALM (seed
// 001): a per-endpoint admission stage with a CoDel overload detector, an
// adaptive concurrency limit, and tiers that decide who is shed first.
//
// How it works. Go's net/http starts every handler at once, so there is no
// queue to measure unless one is built: each endpoint gets a number of
// concurrent slots (its limit) with a queue per tier in front. The wait from
// arrival to handler start is the CoDel signal, measured per tier queue: when
// the minimum wait over an interval (100 ms) exceeds a target (5 ms), that
// queue is overloaded until it drains (see detector), and while it is,
// requests that waited longer than 2 × target are dropped, lowest tier first;
// tiers below the one being dropped are rejected on arrival until FloorHold
// after the overload. The queue serves the highest tier first, FIFO normally and newest
// first (adaptive LIFO) under overload, and in a sheddable tier as soon as
// its oldest request has waited 2 × target (before CoDel, which needs an
// interval, has called the overload). A request whose deadline would pass
// before it could start is dropped. Only the excess goes: a tier above the
// lowest is dropped, and served newest first, only while it and the tiers
// above it asked for more, over the last three intervals, than the endpoint
// admitted (see demand.go); a queue of it that stood for a moment drains
// once the tiers below are shed. The first drop of an overload episode
// waits until the queue has stood for six intervals, holds an interval of
// work, or the stage admits nothing (see episode.go): a burst of random
// arrivals below capacity drains by itself. The limit adapts (see limiter, and
// probe.go for the probes that re-measure an inflated baseline) unless
// fixed. Each endpoint has its own stage and detector: a spike on one never
// sheds another.
//
// The queue in front of the stage. When handlers are CPU-bound and the
// processors are busy, requests wait in Go's run queue before the middleware
// runs (handlers that never block run one after the other), so the stage
// sees no more than GOMAXPROCS in flight and no queue of its own. While the
// runtime's run queue has a backlog, an admitted request of a sheddable tier
// (of any tier, if its endpoint is shedding or queueing) therefore yields its
// processor before its handler runs, until the runtime next polls the network
// (see shed/internal/runq; one poll serves every request that yields before it): the
// waiting goroutines, and the requests that poll finds,
// parse their requests and reach the stage, where they queue by tier and
// CoDel sees them. While the processors are also saturated, an
// empty stage queue does not count as drained and the limiter does not grow
// (runq.Queue.Saturated). The CoDel target is at least two turns of the queue
// (the time it takes to advance by one request), so that random arrivals at
// 80% load are not taken for an overload. Handlers that wait on the network
// (a proxy's: the gateway sets it) give up their processor at their first
// wait anyway: with Config.IOBound an admitted request never yields; the
// probe still feeds the limiter.
//
// Tiers. critical_plus and critical are never shed (Config.NeverShed);
// sheddable is shed first, then sheddable_plus. A request's tier is its
// Veer-Criticality header (or gRPC metadata) when its caller may set one,
// else the endpoint × caller table keyed by Rpc-Caller (config file, hot
// reloaded with Apply, e.g. through config/watch; run-time overrides
// through AdminHandler), else the default, sheddable_plus.
//
// Rejection storms. Clients that ignore Retry-After retry as soon as they
// are refused, and on one core the refusals themselves take the processor.
// While an endpoint refuses 12 times what it admits (a deep storm: a
// closed-loop client, not an open-loop overload), an HTTP/1.x refusal is
// held for up to StormRejectHold (100 ms; Config.RejectHold) before it is
// written, which bounds a closed-loop client's retry rate by its
// concurrency; held refusals are bounded (MaxHeld) and allocate nothing.
// A held refusal occupies its connection, so critical requests that share
// a bounded connection pool with the storm (a proxy's, a client's) could
// wait for it: a connection that has carried a critical request is never
// held, and by default HTTP/2 refusals are not held (see pace.go for what
// this still costs).
//
// Contract: the zero Config works. Middleware has the standard
// func(http.Handler) http.Handler shape and answers shed requests with 503,
// Retry-After, a Veer-Shed-Reason header (ReasonHeader: a deadline drop is
// told from overload without the body) and a small JSON body, in the form
// of outcome.WriteHTTP, prebuilt; shed/shedgrpc has the gRPC interceptors.
// The unloaded path is one atomic compare-and-swap, no lock; the loaded
// path takes the endpoint's mutex. The state gauges and Stats are read when
// asked and are true within an interval of a load's end. Serve /metrics
// outside the middleware (its own listener): wrapped, a scrape is shed like
// any request under the very overload it should show.
//
// Failure modes: a request that never releases its Ticket holds its slot
// forever (Middleware releases with defer, also on panic). A critical tier
// can still be refused when the endpoint's bounded queue is full of critical
// requests (MaxQueue), because memory is bounded first. Endpoints beyond
// MaxEndpoints share one stage ("other"), so a flood of random paths is shed
// together rather than growing memory. Metrics (veer_shed_*) are labelled by
// endpoint, tier and reason, never by caller.
package shed
