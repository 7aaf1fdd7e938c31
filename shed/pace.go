package shed

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/tier"
)

// Rejection storms. A closed-loop client that ignores Retry-After (hey -c
// 128, a retry loop without backoff) sends its next request as soon as the
// last one is refused: the cheaper the refusal, the faster the retries, and
// on one core the refusals themselves (read, parse, write, ~20-50 µs each)
// take the processor from the requests being served; goodput fell to 0.49×
// of capacity at hey -c 128 (issue 18). So while an endpoint refuses more
// requests than it admits (a storm: stage.storm, decided per interval), a
// refusal is held before it is written, for between 7/8 of RejectHold and
// RejectHold. A closed-loop client's retry rate then falls to its
// concurrency over the hold (128 / 0.1 s ≈ 1 300/s at most, not 10-19 k/s),
// and an open-loop one is not slowed at all (its requests come anyway; a
// held refusal only occupies its connection longer).
//
// Bounds: a held refusal costs a parked goroutine that net/http has anyway
// (its connection's) and no allocation: waiters share one channel per
// eighth of the hold, closed by a single timer that runs only while someone
// waits. At most MaxHeld refusals are held at once per Shedder; beyond
// that they are answered at once. A held refusal ends early when its
// request's context does (the client left) or the Shedder is closed.
//
// gRPC: shedgrpc's interceptors hold their refusals too (Hold); the tap
// handle does not (it must not block), so a storm refused there is not
// paced.
//
// On by default for HTTP/1.x in a deep storm (stormDeepRatio: a closed-loop
// storm, not an open-loop overload, which holding cannot slow), except on
// connections that have carried a critical request (Config.RejectHold;
// StormRejectHold). The stage, the
// pacer and net/http's server couple nothing to a held refusal: a critical
// request on its own connection, or multiplexed on the storm's HTTP/2
// connection, is served while every refusal is held. But a held HTTP/1.1
// refusal keeps its connection busy, and a client pool that is bounded and
// shared by the storm and critical traffic (a proxy's per-server
// connection limit, http.Transport's MaxConnsPerHost, a gateway's upstream
// pool) then has every connection busy: its critical requests wait for a
// held refusal to end, up to RejectHold each, again and again while the
// storm lasts (TestHeldRefusalsAndCritical). The server cannot tell such a
// pool from many separate clients, but it can see which connections carry
// critical traffic: a connection (its remote address) that has carried a
// request of a tier that is never shed is never held, so a shared pool
// that carries critical requests keeps a connection that answers at once
// and drains the pool's queue, while a storm's own connections (hey, a
// retry loop in a client library) are paced. What the default still
// costs: a shared bounded pool whose connections have carried no critical
// request yet (the storm came first) makes its first critical request wait
// for a held refusal (up to RejectHold, several when the storm queues more
// requests than the pool has connections); that request marks its
// connection, and the next ones pass. HTTP/2 refusals are held only when
// RejectHold is set (a held stream counts against the connection's stream
// limit, which a proxy multiplexing onto one connection waits for), and so
// are refusals through Hold (gRPC). The marks are bounded (maxMarks
// addresses; when full they are forgotten at once, which can only make a
// connection held again, never lose a request).
//
// Trade-offs: a refusal outside a storm is never held, so a well-behaved
// caller (or a proxy that retries elsewhere) learns of ordinary shedding at
// once; in a storm it learns up to RejectHold later, which a caller that
// honours Retry-After (1 s) does not notice. Closing abusive callers'
// keep-alive connections was the other option: it costs the server a
// handshake per retry and punishes every request multiplexed on the
// connection, so it is used only for a large unread body (rejectWire).

// MaxHeld bounds the refusals a Shedder holds at once.
const MaxHeld = 4096

// maxMarks bounds the connections a Shedder remembers as having carried a
// request of a tier that is never shed.
const maxMarks = 4096

// stormMinRejects is the fewest refusals in an interval that can make a
// storm: a handful of refusals at a small endpoint is not one.
const stormMinRejects = 10

// stormDeepRatio is how many times the admissions two intervals in a row
// must refuse, in a storm, for the default hold (RejectHold zero) to begin
// (a deep storm); it lasts while the storm does and stormDeepLinger
// intervals more (held clients come back in waves, and an interval in
// which they were all held ends the storm). Holding paces closed-loop clients only: an open-loop overload
// sends its requests anyway, and at 2× or 6× (refusals 1-5 × the
// admissions, up to ~10 × in the interval where the overload begins)
// holding its refusals only keeps more connections open. A closed-loop
// storm refuses far more (hey -c 128 against a 5 ms handler: 15-28 × the
// admissions, then ~6 × once held, which keeps it a storm).
const stormDeepRatio = 12

// stormDeepLinger is how many intervals without a storm end a deep storm.
const stormDeepLinger = 10

// deepNext (at an interval end, under mu) is the deep-storm state after an
// interval that was or was not a storm and did or did not refuse
// stormDeepRatio × its admissions. One such interval is not enough: on a
// real server an interval in which the processor was taken away admits
// few and refuses many, even at 2×.
func (st *stage) deepNext(storm, deep bool) bool {
	before := st.deepPrev
	st.deepPrev = deep
	switch {
	case storm && (st.deepStorm.Load() || deep && before):
		st.deepCalm = 0
		return true
	case st.deepStorm.Load() && !storm:
		st.deepCalm++
		return st.deepCalm < stormDeepLinger
	}
	return false
}

// paceSteps is the number of batches a hold is cut into: waiters are
// released by a timer that ticks every RejectHold/paceSteps, so that the
// clients of a storm come back spread over the hold, not all at once (a
// batch of half the storm's clients made the run queue jump by that many
// goroutines each half hold).
const paceSteps = 8

// pacer releases held refusals in batches, one batch per step.
type pacer struct {
	mu      sync.Mutex
	ring    [paceSteps]chan struct{} // ring[head] closes at the next step
	waiters [paceSteps]int
	pending int // waiters registered in the ring
	head    int
	armed   bool
	clk     clock.Clock
}

// wait blocks for between (paceSteps-1)/paceSteps × hold and hold, or
// until ctx or done ends.
func (p *pacer) wait(ctx context.Context, hold time.Duration, done <-chan struct{}) {
	step := hold / paceSteps
	p.mu.Lock()
	if p.ring[0] == nil {
		for i := range p.ring {
			p.ring[i] = make(chan struct{})
		}
	}
	last := (p.head + paceSteps - 1) % paceSteps // closes paceSteps steps from the last step
	ch := p.ring[last]
	p.waiters[last]++
	p.pending++
	if !p.armed {
		p.armed = true
		p.clk.AfterFunc(step, func() { p.step(step) })
	}
	p.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	case <-done:
	}
}

// step releases the batch at the head and re-arms while waiters remain.
func (p *pacer) step(step time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.ring[p.head])
	p.ring[p.head] = make(chan struct{})
	p.pending -= p.waiters[p.head]
	p.waiters[p.head] = 0
	p.head = (p.head + 1) % paceSteps
	if p.pending == 0 {
		p.armed = false
		return
	}
	p.clk.AfterFunc(step, func() { p.step(step) })
}

// Hold holds a refusal of a request to endpoint (from Acquire) while the
// endpoint is in a rejection storm, for between 7/8 of RejectHold and
// RejectHold, or until ctx ends; otherwise it returns at once. Middleware
// calls it; other adapters (shedgrpc's interceptors, a gateway) call it
// before they answer a refusal.
func (s *Shedder) Hold(ctx context.Context, endpoint string) {
	if st := s.lookup(endpoint); st != nil {
		s.hold(ctx, st, s.pol.Load())
	}
}

// hold holds a refusal of endpoint st while it is in a storm and
// RejectHold is set (see above).
func (s *Shedder) hold(ctx context.Context, st *stage, p *policy) {
	if p.rejectHold > 0 && st.storm.Load() {
		s.holdFor(ctx, st, p.rejectHold)
	}
}

// holdRefusal holds Middleware's refusal of r while endpoint st is in a
// storm: HTTP/1.x in a deep storm (stormDeepRatio) by default, every
// protocol in any storm when RejectHold is set, never on a connection that
// has carried a request of a never-shed tier.
func (s *Shedder) holdRefusal(r *http.Request, st *stage, p *policy) {
	s.holdConn(r.Context(), st, p, r.ProtoMajor, r.RemoteAddr)
}

// holdConn is holdRefusal for a request of HTTP major version proto on
// the connection from addr.
func (s *Shedder) holdConn(ctx context.Context, st *stage, p *policy, proto int, addr string) {
	on := st.storm.Load() // RejectHold set: every storm, every protocol
	if p.rejectHold <= 0 {
		on = p.httpHold > 0 && proto == 1 && st.deepStorm.Load()
	}
	if !on || s.marks.has(addr) {
		return
	}
	s.holdFor(ctx, st, p.httpHold)
}

// markConn remembers that the connection from addr carried a request of
// tier t, if t is never shed: its refusals are not held.
func (s *Shedder) markConn(p *policy, t tier.Tier, addr string) {
	if p.httpHold > 0 && !p.sheddable(t) {
		s.marks.mark(addr)
	}
}

// holdFor holds a refusal of endpoint st for between 7/8 of hold and
// hold, unless MaxHeld are held already.
func (s *Shedder) holdFor(ctx context.Context, st *stage, hold time.Duration) {
	if s.held.Add(1) > MaxHeld {
		s.held.Add(-1)
		return
	}
	st.m.held.Inc()
	s.pace.wait(ctx, hold, s.done)
	s.held.Add(-1)
}

// connMarks remembers connections, by remote address, that carried a
// request of a tier that is never shed: at most maxMarks, then forgotten
// all at once. A lookup is one sync.Map load.
type connMarks struct {
	m sync.Map // remote address → struct{}
	n atomic.Int64
}

func (c *connMarks) mark(addr string) {
	if addr == "" {
		return
	}
	if _, ok := c.m.Load(addr); ok {
		return
	}
	if c.n.Add(1) > maxMarks {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(addr, struct{}{})
}

func (c *connMarks) has(addr string) bool {
	if addr == "" {
		return false
	}
	_, ok := c.m.Load(addr)
	return ok
}
