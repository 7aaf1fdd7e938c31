package shed

import (
	"runtime"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Pre-admission queue. On a CPU-bound server most of the queue is not in
// the admission stage at all: Go's net/http reads a request and calls the
// handler on one goroutine, and while the processors are busy running
// handlers, the goroutines of newly readable or accepted connections wait
// in the Go scheduler's run queues before the middleware ever runs.
// Handlers that do not block run one after the other per processor, so the
// stage sees at most GOMAXPROCS requests in flight, its slots never fill,
// nothing queues in it and CoDel never sees a wait, however long requests
// really waited.
//
// The runtime counts that queue: /sched/goroutines/runnable:goroutines is
// the number of goroutines ready to run but waiting for a processor. The
// probe samples it at most every schedEvery and keeps the minimum over the
// current interval (CoDel's standing queue: the fewest goroutines that were
// ever waiting); a stage turns it into a wait with its own service time
// (runnable × service time / GOMAXPROCS).

// schedEvery is the shortest time between two reads of the runtime's
// scheduler statistics (a read takes the scheduler lock briefly).
const schedEvery = 10 * time.Millisecond

// schedProbe is the process-wide sampler shared by every stage.
type schedProbe struct {
	next atomic.Int64 // unix ns of the next sample

	mu      sync.Mutex
	sample  []rtmetrics.Sample
	start   time.Time // start of the current interval
	min     uint64    // fewest runnable goroutines seen in the current interval
	seen    bool
	lastMin uint64 // the minimum of the last complete interval
}

func newSchedProbe() *schedProbe {
	return &schedProbe{sample: []rtmetrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}}
}

var processSched = newSchedProbe()

// observe samples the run queue at now if schedEvery has passed since the
// last sample. It is cheap when it is not due (one atomic load).
func (p *schedProbe) observe(now time.Time) {
	if !p.due(now) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sampleLocked(now)
}

// due reports whether a sample is due at now; a clock that went back by
// more than schedEvery (another Shedder's clock, a test's fake time) makes
// it due at once rather than never.
func (p *schedProbe) due(now time.Time) bool {
	next := p.next.Load()
	return now.UnixNano() >= next || next-now.UnixNano() > int64(schedEvery)
}

func (p *schedProbe) sampleLocked(now time.Time) {
	if !p.due(now) {
		return
	}
	p.next.Store(now.Add(schedEvery).UnixNano())
	rtmetrics.Read(p.sample)
	if p.sample[0].Value.Kind() != rtmetrics.KindUint64 {
		return // not supported by this runtime
	}
	n := p.sample[0].Value.Uint64()
	if !p.seen || n < p.min {
		p.min, p.seen = n, true
	}
}

// runnable returns the fewest goroutines waiting for a processor during
// the last complete interval of length every, closing the current one if
// it has ended by now.
func (p *schedProbe) runnable(now time.Time, every time.Duration) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.start.IsZero() || p.start.Sub(now) > every {
		// First use, or a clock that is not the one of the last call
		// (stages that read the time just before another one are only
		// slightly behind): nothing measured so far applies.
		p.start, p.seen, p.min, p.lastMin = now, false, 0, 0
		p.next.Store(0)
	}
	p.sampleLocked(now)
	if now.Sub(p.start) >= every/2 { // stages tick about every interval
		p.lastMin = p.min
		if !p.seen {
			p.lastMin = 0
		}
		p.seen, p.min = false, 0
		p.start = now
	}
	return p.lastMin
}

// preWait is the default pre-admission wait estimate of a stage whose
// requests take svc each: the standing run queue beyond one goroutine per
// processor (the next in line on each processor is not a queue: it starts
// as soon as the running one yields), times svc, per processor.
func (p *schedProbe) preWait(now time.Time, every, svc time.Duration) time.Duration {
	procs := uint64(runtime.GOMAXPROCS(0))
	n := p.runnable(now, every)
	if n <= procs {
		return 0
	}
	return time.Duration(n-procs) * svc / time.Duration(procs)
}
