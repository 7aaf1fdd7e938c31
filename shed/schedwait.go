package shed

import (
	"runtime"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// The queue in front of the stage. On a CPU-bound server most of the queue
// is not in the admission stage at all: Go's net/http reads a request and
// calls the handler on one goroutine, and while the processors are busy
// running handlers, the goroutines of newly readable connections wait in
// the Go scheduler's run queues before the middleware ever runs. Handlers
// that do not block run one after the other per processor, so the stage sees
// at most GOMAXPROCS requests in flight, its slots never fill, nothing queues
// in it and CoDel never sees a wait, however long requests really waited.
//
// Two things bring that queue into the stage, where it has tiers, CoDel and
// adaptive LIFO:
//
//   - While the run queue has a backlog (busy), an admitted request of a
//     sheddable tier yields its processor before its handler runs, until
//     the runtime next polls the network (pollYield). The goroutines waiting
//     in the run queue, and those of the requests the poll finds, then parse
//     their requests and reach the stage, where they queue for a slot and
//     are measured, ordered and shed. A tier that is never shed yields only
//     when its endpoint is shedding or queueing (stage.contended): a quiet
//     endpoint beside a busy one starts its requests at once. One poll
//     serves every request that yields before it.
//   - While the processors are saturated as well (the process used at least
//     90% of GOMAXPROCS over the last 50 ms), an empty stage queue is not a
//     drained one (requests are still on their way to it), and the limiter
//     neither grows nor takes the slowness for a slow dependency.

// runQueue tells stages whether requests wait before they reach them.
type runQueue interface {
	// observe samples the runtime if a sample is due at now; cheap when
	// it is not.
	observe(now time.Time)
	// busy: the run queue had a backlog (more than backlogFactor ×
	// GOMAXPROCS runnable goroutines) within backlogHold.
	busy() bool
	// saturated: busy, and the processors were saturated.
	saturated() bool
}

// schedEvery is the shortest time between two samples (a read of the
// runtime's scheduler statistics takes the scheduler lock briefly).
const schedEvery = 10 * time.Millisecond

// backlogFactor: the run queue has a backlog when more than backlogFactor ×
// GOMAXPROCS goroutines are runnable. A goroutine or two per processor
// waiting for a moment is ordinary scheduling (timers, a parallel
// benchmark); a backlog under CPU overload is tens.
const backlogFactor = 2

// backlogHold is how long one sample that saw a backlog keeps the probe
// busy: the run queue empties in bursts as goroutines yield, and a sample
// taken just after one must not report the backlog gone.
const backlogHold = 50 * time.Millisecond

// cpuWindow is the shortest period over which CPU utilisation is measured;
// saturatedUse the utilisation (of GOMAXPROCS) from which the processors
// count as saturated.
const (
	cpuWindow    = 50 * time.Millisecond
	saturatedUse = 0.9
)

// schedProbe is the process-wide runQueue shared by every stage: it reads
// /sched/goroutines/runnable:goroutines (Go 1.26) and the process CPU time.
type schedProbe struct {
	next    atomic.Int64 // unix ns of the next sample
	backlog atomic.Bool
	cpuSat  atomic.Bool

	mu          sync.Mutex
	sample      []rtmetrics.Sample
	lastBacklog time.Time
	cpuAt       time.Time     // start of the current CPU window
	cpuUsed     time.Duration // process CPU time at cpuAt
	cpu         func() (time.Duration, bool)
}

func newSchedProbe() *schedProbe {
	return &schedProbe{
		sample: []rtmetrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}},
		cpu:    processCPU,
	}
}

var processSched = newSchedProbe()

func (p *schedProbe) busy() bool      { return p.backlog.Load() }
func (p *schedProbe) saturated() bool { return p.backlog.Load() && p.cpuSat.Load() }

func (p *schedProbe) observe(now time.Time) {
	if !p.due(now) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.due(now) {
		p.sampleLocked(now)
	}
}

// due reports whether a sample is due at now; a clock that went back by
// more than schedEvery (another Shedder's clock, a test's fake time) makes
// it due at once rather than never.
func (p *schedProbe) due(now time.Time) bool {
	next := p.next.Load()
	return now.UnixNano() >= next || next-now.UnixNano() > int64(schedEvery)
}

func (p *schedProbe) sampleLocked(now time.Time) {
	p.next.Store(now.Add(schedEvery).UnixNano())
	procs := runtime.GOMAXPROCS(0)
	rtmetrics.Read(p.sample)
	if p.sample[0].Value.Kind() == rtmetrics.KindUint64 {
		if p.sample[0].Value.Uint64() > uint64(backlogFactor*procs) {
			p.lastBacklog = now
			p.backlog.Store(true)
		} else if d := now.Sub(p.lastBacklog); d >= backlogHold || d < 0 {
			p.backlog.Store(false)
		}
	}
	d := now.Sub(p.cpuAt)
	if d < cpuWindow && d >= 0 {
		return
	}
	used, ok := p.cpu()
	switch {
	case !ok: // no CPU accounting here: a backlog counts as saturation
		p.cpuSat.Store(true)
	case p.cpuAt.IsZero() || d < 0 || d > 4*cpuWindow:
		p.cpuSat.Store(false) // no recent window: start one
	default:
		use := float64(used-p.cpuUsed) / float64(d) / float64(procs)
		p.cpuSat.Store(use >= saturatedUse)
	}
	p.cpuAt, p.cpuUsed = now, used
}
