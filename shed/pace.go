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
// refusal is held before it is written, for between RejectHold/2 and
// RejectHold. A closed-loop client's retry rate then falls to its
// concurrency over the hold (128 / 0.1 s ≈ 1 300/s at most, not 10-19 k/s),
// and an open-loop one is not slowed at all (its requests come anyway; a
// held refusal only occupies its connection longer).
//
// Bounds: a held refusal costs a parked goroutine that net/http has anyway
// (its connection's) and no allocation: waiters share one channel per
// half-hold step, closed by a single timer that runs only while someone
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

// pacer releases held refusals in batches, one batch per step.
type pacer struct {
	mu        sync.Mutex
	cur, next chan struct{} // cur closes at the next step, next at the one after
	waitNext  int           // waiters registered on next
	waitCur   int           // waiters on cur
	armed     bool
	clk       clock.Clock
}

// wait blocks for between step and 2 × step, or until ctx or done ends.
func (p *pacer) wait(ctx context.Context, step time.Duration, done <-chan struct{}) {
	p.mu.Lock()
	if p.next == nil {
		p.cur, p.next = make(chan struct{}), make(chan struct{})
	}
	ch := p.next
	p.waitNext++
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

// step releases the batch on cur and re-arms while a batch waits.
func (p *pacer) step(step time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.cur)
	p.cur, p.waitCur = p.next, p.waitNext
	p.next, p.waitNext = make(chan struct{}), 0
	if p.waitCur == 0 {
		p.armed = false
		return
	}
	p.clk.AfterFunc(step, func() { p.step(step) })
}

// Hold holds a refusal of a request to endpoint (from Acquire) while the
// endpoint is in a rejection storm, for between RejectHold/2 and
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
	s.pace.wait(ctx, p.rejectHold/2, s.done)
	s.held.Add(-1)
}
