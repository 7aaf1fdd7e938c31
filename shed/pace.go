package shed

import (
	"context"
	"sync"
	"time"

	"github.com/veerhq/veer/clock"
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
// Trade-offs: a refusal outside a storm is never held, so a well-behaved
// caller (or a proxy that retries elsewhere) learns of ordinary shedding at
// once; in a storm it learns up to RejectHold later, which a caller that
// honours Retry-After (1 s) does not notice. Closing abusive callers'
// keep-alive connections was the other option: it costs the server a
// handshake per retry and punishes every request multiplexed on the
// connection, so it is used only for a large unread body (rejectWire).

// MaxHeld bounds the refusals a Shedder holds at once.
const MaxHeld = 4096

// stormMinRejects is the fewest refusals in an interval that can make a
// storm: a handful of refusals at a small endpoint is not one.
const stormMinRejects = 10

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

// hold holds a refusal of endpoint st while it is in a storm (see above).
func (s *Shedder) hold(ctx context.Context, st *stage, p *policy) {
	if p.rejectHold <= 0 || !st.storm.Load() {
		return
	}
	if s.held.Add(1) > MaxHeld {
		s.held.Add(-1)
		return
	}
	s.pace.wait(ctx, p.rejectHold, s.done)
	s.held.Add(-1)
}
