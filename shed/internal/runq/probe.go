package runq

import (
	"runtime"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Queue tells stages whether requests wait in the Go scheduler's run
// queue before they reach them (see the package doc). Implementations are
// safe for concurrent use; Busy and Saturated must not block (they are read
// on every admission).
type Queue interface {
	// Observe samples the runtime if a sample is due at now; cheap when
	// it is not.
	Observe(now time.Time)
	// Busy: the run queue had a backlog (more than backlogFactor ×
	// GOMAXPROCS runnable goroutines) within BacklogHold.
	Busy() bool
	// Saturated: Busy, and the processors were saturated.
	Saturated() bool
}

// schedEvery is the shortest time between two samples (a read of the
// runtime's scheduler statistics takes the scheduler lock briefly).
const schedEvery = 10 * time.Millisecond

// backlogFactor: the run queue has a backlog when more than backlogFactor ×
// GOMAXPROCS goroutines are runnable. A goroutine or two per processor
// waiting for a moment is ordinary scheduling (timers, a parallel
// benchmark); a backlog under CPU overload is tens.
const backlogFactor = 2

// BacklogHold is how long one sample that saw a backlog keeps the probe
// busy: the run queue empties in bursts as goroutines yield, and a sample
// taken just after one must not report the backlog gone.
const BacklogHold = 50 * time.Millisecond

// cpuWindow is the shortest period over which CPU utilisation is measured;
// saturatedUse the utilisation (of GOMAXPROCS) from which the processors
// count as saturated.
const (
	cpuWindow    = 50 * time.Millisecond
	saturatedUse = 0.9
)

// Probe is a Queue that reads the runtime: it samples
// /sched/goroutines/runnable:goroutines (Go 1.26) and the process CPU time
// at most every schedEvery. Process returns the one every Shedder shares.
type Probe struct {
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

// NewProbe returns a Probe of the runtime's run queue and the process CPU
// time (ProcessCPU). A process needs one (Process); tests make their own.
func NewProbe() *Probe {
	return &Probe{
		sample: []rtmetrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}},
		cpu:    ProcessCPU,
	}
}

var process = NewProbe()

// Process returns the process-wide Probe: the run queue and processors are
// the process's, so every stage of every Shedder reads one.
func Process() *Probe { return process }

// Busy implements Queue.
func (p *Probe) Busy() bool { return p.backlog.Load() }

// Saturated implements Queue.
func (p *Probe) Saturated() bool { return p.backlog.Load() && p.cpuSat.Load() }

var _ Queue = (*Probe)(nil)

// Observe implements Queue.
func (p *Probe) Observe(now time.Time) {
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
func (p *Probe) due(now time.Time) bool {
	next := p.next.Load()
	return now.UnixNano() >= next || next-now.UnixNano() > int64(schedEvery)
}

func (p *Probe) sampleLocked(now time.Time) {
	p.next.Store(now.Add(schedEvery).UnixNano())
	procs := runtime.GOMAXPROCS(0)
	rtmetrics.Read(p.sample)
	if p.sample[0].Value.Kind() == rtmetrics.KindUint64 {
		if p.sample[0].Value.Uint64() > uint64(backlogFactor*procs) {
			p.lastBacklog = now
			p.backlog.Store(true)
		} else if d := now.Sub(p.lastBacklog); d >= BacklogHold || d < 0 {
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
