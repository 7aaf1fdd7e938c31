package shed

import (
	"context"
	"sync"
	"time"

	"github.com/veerhq/veer/shed/internal/runq"
	"github.com/veerhq/veer/tier"
)

// modelCore is the virtual-time models' one core: every request needs it,
// and the run-queue probe reads how many wait for it (coreQueue).
//
// In the plain model it serves in arrival order. With sched (the Go
// scheduler as the stage meets it), a request whose turn on the core comes
// right after admission takes the core next, ahead of the run queue
// (useNext): one admitted on the fast path never left the processor, and
// one granted a slot from the stage queue is made runnable by the Release
// that granted it, which the runtime runs next (runnext). And yield models
// runq.Yield: the request parks, holding its slot, until the run queue has
// drained (the core fell free with nobody waiting for it: the runtime polls
// the network when it has nothing else to run) or pollEvery after it parked
// (the monitor thread's poll, which wakes every parked yield), and then
// queues behind whoever is waiting, like a request the poll found. Every
// yield parks (they share one poll: runq.Yield has no cap on them). Since
// the core serves in order, a yield returns after what its poll found has
// run, which the real runtime does not promise (its global run queue is
// served first every 61st round), so the models set the start turn's
// settle to a no-op: a second yield here would wait for the next arrivals
// too, which never stop at 6×.
type modelCore struct {
	coreQueue
	sched bool

	mu     sync.Mutex
	held   bool
	next   []chan struct{} // served before queue (runnext)
	queue  []chan struct{}
	polled chan struct{} // closed when the run queue has drained
	parked int
}

// request is one request of the models on this core: the CPU every
// request costs before the stage decides (refusalCost), then, if the stage
// admits it within a second, its handler, ahead of the run queue.
func (c *modelCore) request(s *Shedder, ep string, tr tier.Tier) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.use(refusalCost)
	tk, err := s.Acquire(ctx, ep, tr)
	if err == nil {
		c.useNext(modelHandler)
		tk.Release()
	}
	return err
}

// pollEvery is how often the runtime's monitor polls the network while the
// run queue never drains (10-20 ms in practice, docs/shed.md).
const pollEvery = 20 * time.Millisecond

// pollCost is how long a yield takes when nothing else wants the core.
const pollCost = 2 * time.Microsecond

func newModelCore(sched bool) *modelCore {
	return &modelCore{sched: sched, polled: make(chan struct{})}
}

// use holds the core for d, after everyone waiting for it.
func (c *modelCore) use(d time.Duration) { c.run(d, false) }

// useNext holds the core for d, ahead of the queue when sched is on.
func (c *modelCore) useNext(d time.Duration) { c.run(d, c.sched) }

func (c *modelCore) run(d time.Duration, next bool) {
	c.mu.Lock()
	if c.held {
		ch := make(chan struct{})
		if next {
			c.next = append(c.next, ch)
		} else {
			c.queue = append(c.queue, ch)
		}
		c.waiting.Add(1)
		c.mu.Unlock()
		<-ch // handed the core by the one before
	} else {
		c.held = true
		c.mu.Unlock()
	}
	time.Sleep(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	var ch chan struct{}
	switch {
	case len(c.next) > 0:
		ch, c.next = c.next[0], c.next[1:]
	case len(c.queue) > 0:
		ch, c.queue = c.queue[0], c.queue[1:]
	}
	if ch == nil {
		c.held = false
		c.pollLocked()
		return
	}
	c.waiting.Add(-1)
	close(ch)
}

// pollLocked wakes the parked yields.
func (c *modelCore) pollLocked() {
	if c.parked > 0 {
		close(c.polled)
		c.polled = make(chan struct{})
		c.parked = 0
	}
}

// procs: the model has one core (the start turn's processors, turn.go).
func (c *modelCore) procs() int { return 1 }

// yield is runq.Yield in the model (see modelCore).
func (c *modelCore) yield() {
	c.mu.Lock()
	if !c.held {
		// Nothing else to run: the poll comes at once. It takes a
		// moment (a system call), and a request that took the core
		// meanwhile (in the real runtime: one that took its start
		// turn, turn.go, and never left the processor before its
		// handler) runs first; then this yield waits for the next
		// poll like any other.
		c.mu.Unlock()
		time.Sleep(pollCost)
		c.mu.Lock()
		if !c.held {
			c.mu.Unlock()
			return
		}
	}
	c.parked++
	ch := c.polled
	c.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(pollEvery):
		c.mu.Lock()
		c.pollLocked()
		c.mu.Unlock()
	}
	c.use(0) // behind the requests the poll found
}

// heldProbe is the model core's run-queue probe with the real probe's
// memory (runq.Probe): a backlog seen keeps it busy for backlogHold. The
// plain model core reports only the instant, so right after a poll had
// drained it a request granted a slot started its handler without a
// yield, which the real probe does not let happen during an overload
// (TestModelIsolation uses it; the older rows keep the plain core, whose
// figures docs/shed.md quotes).
type heldProbe struct {
	*modelCore
	mu   sync.Mutex
	last time.Time
}

func (h *heldProbe) Busy() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if h.modelCore.Busy() {
		h.last = now
	}
	return !h.last.IsZero() && now.Sub(h.last) < runq.BacklogHold
}

func (h *heldProbe) Saturated() bool { return h.Busy() }
