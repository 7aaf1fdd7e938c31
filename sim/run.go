package sim

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/failover"
)

// Strategy is a failover policy under evaluation. New builds a fresh policy
// for one app launch from the scenario's failover.Config, domains filled in
// (Scenario.PolicyConfig).
type Strategy struct {
	Name string
	New  func(cfg failover.Config) (failover.Policy, error)
}

// maxSessions bounds the sessions of one run.
const maxSessions = 10_000_000

// Options control a run.
type Options struct {
	// Sessions overrides the scenario's session count when > 0 (at most
	// 10,000,000); negative is an error.
	Sessions int
	// Seed overrides the scenario's seed when non-nil.
	Seed *uint64
	// Workers is the number of goroutines; 0 means GOMAXPROCS. The
	// result does not depend on it.
	Workers int
	// Progress, when set, receives a line at each 10% of the sessions
	// once the run has taken two seconds.
	Progress io.Writer
	// File is the scenario's path, to resolve trace files; "" for a
	// bundled scenario.
	File string
}

// Result is the outcome of one scenario under every strategy.
type Result struct {
	Scenario   string                     `json:"scenario"`
	Sessions   int                        `json:"sessions"`
	Seed       uint64                     `json:"seed"`
	Domains    []string                   `json:"domains"`
	Strategies map[string]*StrategyResult `json:"strategies"`
	// Order lists the strategies in the order they were requested.
	Order []string `json:"-"`
	// Conditions and Carriers list the bucket and carrier names in order.
	Conditions []string `json:"-"`
	Carriers   []string `json:"-"`
	Classes    []string `json:"-"`
	// CarrierOutage says that an outage of the scenario is scoped to
	// carriers, which makes the per-carrier table worth printing;
	// AffectedCarriers lists those carriers.
	CarrierOutage    bool     `json:"-"`
	AffectedCarriers []string `json:"-"`
	// Outages lists the scenario's outage windows in minutes, for charts.
	Outages []Window `json:"-"`
	// DeviceErrorRate is the share of requests the devices' own networks
	// failed (the same for every strategy).
	DeviceErrorRate float64 `json:"device_error_rate"`
	// Traces describes each trace of the scenario: length, gaps, the
	// share of time in gaps and in outages.
	Traces []TraceStats `json:"traces"`
}

// Window is an outage window in minutes of the horizon.
type Window struct {
	Name     string
	From, To float64
}

// StrategyResult is one strategy's measurements.
type StrategyResult struct {
	Stats
	ByCondition map[string]Stats `json:"by_condition"`
	ByCarrier   map[string]Stats `json:"by_carrier"`
	ByClass     map[string]Stats `json:"by_class"`
	// Timeline is the per-minute traffic of all sessions; CarrierTimeline
	// the same per carrier.
	Timeline *Timeline `json:"timeline"`
	// Transitions counts the policy's state changes over all sessions,
	// keyed "from>to:reason" (failover.State and failover.Reason names).
	Transitions     map[string]int64     `json:"transitions"`
	CarrierTimeline map[string]*Timeline `json:"carrier_timeline"`
}

// Condition buckets: sessions grouped by the share of their requests that
// their own network failed (tunnels, trace gaps, bursty loss), which is the
// same for every strategy.
var conditionBounds = []float64{0.01, 0.03, 0.10, 0.30}

// ConditionNames are the names of the condition buckets, in order.
var ConditionNames = []string{"0-1%", "1-3%", "3-10%", "10-30%", "30-100%"}

func condition(devErrors, requests int) int {
	if requests == 0 {
		return 0
	}
	e := float64(devErrors) / float64(requests)
	for i, b := range conditionBounds {
		if e < b {
			return i
		}
	}
	return len(conditionBounds)
}

// Run simulates the scenario under each strategy. The result depends only on
// the scenario, the strategies, the session count and the seed.
func Run(ctx context.Context, sc *Scenario, strategies []Strategy, opt Options) (*Result, error) {
	m, err := compileFile(sc, opt.File)
	if err != nil {
		return nil, err
	}
	if len(strategies) == 0 {
		return nil, fmt.Errorf("sim: no strategy")
	}
	n := sc.Sessions
	if opt.Sessions < 0 || opt.Sessions > maxSessions {
		return nil, fmt.Errorf("sim: sessions must be between 1 and %d, got %d", maxSessions, opt.Sessions)
	}
	if opt.Sessions > 0 {
		n = opt.Sessions
	}
	seed := sc.Seed
	if opt.Seed != nil {
		seed = *opt.Seed
	}
	domains := make([]string, len(m.domains))
	for i, d := range m.domains {
		domains[i] = d.name
	}
	// Build one policy per strategy up front to report configuration
	// errors before simulating.
	makers := make([]func() failover.Policy, len(strategies))
	pc := sc.PolicyConfig()
	for i, s := range strategies {
		if _, err := s.New(pc); err != nil {
			return nil, fmt.Errorf("sim: strategy %s: %w", s.Name, err)
		}
		makers[i] = func() failover.Policy {
			p, err := s.New(pc)
			if err != nil {
				panic(err) // the same configuration built once already
			}
			return p
		}
	}

	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	groups := len(ConditionNames) + len(sc.Carriers) + len(sc.Traffic)
	var next, done atomic.Int64
	const chunk = 16
	results := make([]*worker, workers)
	var wg sync.WaitGroup
	var progressMu sync.Mutex
	lastTenth := int64(0)
	start := time.Now()
	for w := range workers {
		wk := newWorker(m, len(strategies), groups)
		results[w] = wk
		wg.Go(func() {
			for ctx.Err() == nil {
				lo := int(next.Add(chunk)) - chunk
				if lo >= n {
					return
				}
				hi := min(lo+chunk, n)
				for i := lo; i < hi; i++ {
					wk.session(seed, i, makers)
				}
				d := done.Add(int64(hi - lo))
				if opt.Progress != nil {
					progressMu.Lock()
					if tenth := d * 10 / int64(n); tenth > lastTenth && time.Since(start) >= 2*time.Second {
						lastTenth = tenth
						fmt.Fprintf(opt.Progress, "sim %s: %d/%d sessions (%.1fs)\n", sc.Name, d, n, time.Since(start).Seconds())
					}
					progressMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	total := results[0]
	for _, wk := range results[1:] {
		total.merge(wk)
	}
	res := &Result{
		Scenario: sc.Name, Sessions: n, Seed: seed, Domains: domains,
		Strategies:      map[string]*StrategyResult{},
		Conditions:      ConditionNames,
		DeviceErrorRate: ratio(total.devErrors, total.requests),
		Traces:          m.traceStats,
	}
	for _, c := range sc.Carriers {
		res.Carriers = append(res.Carriers, c.Name)
	}
	for _, c := range sc.Traffic {
		res.Classes = append(res.Classes, c.Name)
	}
	for _, o := range sc.Outages {
		res.CarrierOutage = res.CarrierOutage || len(o.Carriers) > 0
		for _, c := range o.Carriers {
			if !slices.Contains(res.AffectedCarriers, c) {
				res.AffectedCarriers = append(res.AffectedCarriers, c)
			}
		}
		res.Outages = append(res.Outages, Window{Name: o.Name, From: o.Start.Minutes(), To: o.End.Minutes()})
	}
	flapping := false
	for _, o := range m.outages {
		flapping = flapping || (o.primary && len(o.down) > 1)
	}
	for si, s := range strategies {
		res.Order = append(res.Order, s.Name)
		all := newAcc(len(domains))
		sr := &StrategyResult{ByCondition: map[string]Stats{}, ByCarrier: map[string]Stats{}, ByClass: map[string]Stats{}}
		for g, name := range ConditionNames {
			a := total.acc[si][g]
			all.merge(a)
			sr.ByCondition[name] = a.stats(domains, flapping)
		}
		sr.CarrierTimeline = map[string]*Timeline{}
		for c, name := range res.Carriers {
			a := total.acc[si][len(ConditionNames)+c]
			sr.ByCarrier[name] = a.stats(domains, flapping)
			sr.CarrierTimeline[name] = a.timeline()
		}
		for c, name := range res.Classes {
			sr.ByClass[name] = total.acc[si][len(ConditionNames)+len(res.Carriers)+c].stats(domains, flapping)
		}
		sr.Stats = all.stats(domains, flapping)
		sr.Timeline = all.timeline()
		sr.Transitions = all.transitions()
		res.Strategies[s.Name] = sr
	}
	return res, nil
}

// worker owns the buffers and accumulators of one goroutine.
type worker struct {
	m         *model
	real      realisation
	run       runner
	acc       [][]*acc // [strategy][group]
	devErrors int64
	requests  int64
}

func newWorker(m *model, strategies, groups int) *worker {
	w := &worker{m: m, run: runner{m: m}}
	w.acc = make([][]*acc, strategies)
	for s := range w.acc {
		w.acc[s] = make([]*acc, groups)
		for g := range w.acc[s] {
			w.acc[s][g] = newAcc(len(m.domains))
		}
	}
	return w
}

func (w *worker) session(seed uint64, i int, makers []func() failover.Policy) {
	r := &w.real
	w.m.generate(r, seed, i)
	w.devErrors += int64(r.devErrors)
	w.requests += int64(len(r.reqs))
	cond := condition(r.devErrors, len(r.reqs))
	carrier := len(ConditionNames) + r.carrier
	class := len(ConditionNames) + len(w.m.sc.Carriers) + r.class
	for s, mk := range makers {
		ca, cc, cl := w.acc[s][cond], w.acc[s][carrier], w.acc[s][class]
		w.run.run(r, mk, func(us int64) {
			ca.lat.add(us)
			cc.lat.add(us)
			cl.lat.add(us)
		})
		x := &w.run
		for _, a := range []*acc{ca, cc, cl} {
			a.addSession(&x.st)
			a.detect = append(a.detect, x.detect...)
			a.detectFF = append(a.detectFF, x.detectFF...)
			a.recover = append(a.recover, x.recover...)
			a.within += x.within
			a.periods += x.periods
			a.undetected += x.undet
			a.censored += x.censored
			a.phase.add(&x.phase)
			a.addTimeline(x.tlFrom, x.tl)
		}
	}
}

func (w *worker) merge(o *worker) {
	w.devErrors += o.devErrors
	w.requests += o.requests
	for s := range w.acc {
		for g := range w.acc[s] {
			w.acc[s][g].merge(o.acc[s][g])
		}
	}
}
