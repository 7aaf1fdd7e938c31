package sim

import (
	"math"
	"time"

	"github.com/veerhq/veer/failover"
	"github.com/veerhq/veer/outcome"
)

// Epoch is the instant virtual time 0 maps to when the simulator talks to a
// policy (the start of the horizon).
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// conn is the client's connection state to one domain.
type conn struct {
	open     bool
	quic     bool
	kills    int   // value of runner.killed when the connection was made
	lastUse  int64 // end of the last exchange on it
	dnsUntil int64 // the cached address expires then
}

// runner simulates one session under one strategy. A runner is reused
// across sessions by one worker goroutine; it never allocates per request.
type runner struct {
	m      *model
	r      *realisation
	newPol func() failover.Policy
	pol    failover.Policy

	h        eventHeap
	conns    [maxDomains]conn
	killI    int // kill times <= now
	launch   uint32
	wakeGen  uint32
	wakeAt   int64 // pending wake-up, -1 if none
	cur      int   // domain regular traffic used after the last policy call
	restored int   // the persisted backup domain (the Transport's Store)
	canaryN  uint64
	aware    failover.NetworkAware     // pol, when it can be told the network
	hist     []failover.NetworkFailure // the persisted per-network memory
	histGen  uint64                    // aware's MemoryGen when hist was taken

	st        sessionStats
	tl        []tlBucket // per minute from tlFrom
	tlFrom    int
	detectOn  []int64 // per outage: its start while the session is on primary, exposed and undetected; -1 otherwise
	firstFail []int64 // per outage: the first network failure on primary after detectOn, -1 if none
	recovOn   []int64 // per outage: its end while the session is exposed and off primary; -1 otherwise
	period    []int64 // per outage: the recovery delay in effect at its end (Uber), -1 if unknown
	backupAt  int64   // when the policy last entered BACKUP
	phDetect  []int64 // per outage: the start of the current down phase while on primary and exposed; -1 otherwise
	phRecov   []int64 // per outage: the end of the last down phase while off primary and exposed; -1 otherwise
	phase     phaseAcc
	detect    []int64
	detectFF  []int64 // detection counted from the first failure
	recover   []int64
	within    int64 // recoveries within two recovery periods
	periods   int64 // recoveries with a known period
	undet     int64
	censored  int64
	latency   func(us int64) // where to record latencies
}

func (x *runner) at(t int64) time.Time { return Epoch.Add(time.Duration(t)) }

// run simulates the session r under the policy built by newPol.
func (x *runner) run(r *realisation, newPol func() failover.Policy, latency func(int64)) {
	x.r, x.newPol, x.latency = r, newPol, latency
	x.h.reset()
	x.conns = [maxDomains]conn{}
	x.killI, x.launch, x.wakeGen, x.canaryN = 0, 0, 0, 0
	x.st = sessionStats{}
	x.tlFrom = int(r.start / int64(time.Minute))
	x.tl = x.tl[:0]
	for range int(r.end/int64(time.Minute)) - x.tlFrom + 1 {
		x.tl = append(x.tl, tlBucket{})
	}
	x.detect, x.detectFF, x.recover = x.detect[:0], x.detectFF[:0], x.recover[:0]
	x.undet, x.censored, x.within, x.periods = 0, 0, 0, 0
	x.backupAt = -1
	n := len(x.m.outages)
	x.detectOn = resize(x.detectOn, n, -1)
	x.recovOn = resize(x.recovOn, n, -1)
	x.firstFail = resize(x.firstFail, n, -1)
	x.period = resize(x.period, n, -1)
	x.phDetect = resize(x.phDetect, n, -1)
	x.phRecov = resize(x.phRecov, n, -1)
	x.phase.reset()
	x.restored = failover.None
	x.hist = x.hist[:0]
	x.cur = failover.PrimaryIndex
	x.startApp(r.start)

	ri, ei := 0, 0
	for {
		// Next event: pending heap events first at equal times, then
		// session events, then request arrivals.
		t := int64(math.MaxInt64)
		src := 0
		if x.h.len() > 0 {
			t, src = x.h.top().t, 1
		}
		if ei < len(r.events) && r.events[ei].t < t {
			t, src = r.events[ei].t, 2
		}
		if ri < len(r.reqs) && r.reqs[ri].t < t {
			t, src = r.reqs[ri].t, 3
		}
		if src == 0 || t >= r.end {
			break
		}
		for x.killI < len(r.kills) && r.kills[x.killI] <= t {
			x.killI++
		}
		switch src {
		case 1:
			x.handle(x.h.pop())
		case 2:
			x.session(r.events[ei])
			ei++
		case 3:
			x.request(t, &r.reqs[ri])
			ri++
		}
	}
	for k := range x.recovOn {
		if x.recovOn[k] >= 0 {
			x.censored++
			x.recovOn[k] = -1
		}
		x.detectOn[k] = -1
		if x.phRecov[k] >= 0 {
			x.phase.censored++
			x.phRecov[k] = -1
		}
		x.phDetect[k] = -1
	}
}

func resize(s []int64, n int, v int64) []int64 {
	s = s[:0]
	for range n {
		s = append(s, v)
	}
	return s
}

// startApp launches the app: a new policy starts with the persisted backup.
func (x *runner) startApp(t int64) {
	x.launch++
	x.h.reset()
	x.wakeAt = -1
	x.pol = x.newPol()
	x.aware, _ = x.pol.(failover.NetworkAware)
	if x.aware != nil {
		x.aware.Remember(x.hist)
		x.histGen = x.aware.MemoryGen()
	}
	x.apply(t, x.pol.Start(x.at(t), x.restored))
	if x.aware != nil { // the app learns its network at launch
		x.apply(t, x.aware.SetNetwork(x.at(t), x.m.networkID(x.r, t)))
	}
}

func (x *runner) session(e sessEvent) {
	switch e.kind {
	case evRelaunch:
		x.startApp(e.t)
	case evNetChange:
		// The new network has its own resolver: cached addresses go. (Its
		// connections are closed through the realisation's kill times.)
		for d := range x.conns {
			x.conns[d].dnsUntil = 0
		}
		if x.aware != nil {
			x.apply(e.t, x.aware.SetNetwork(x.at(e.t), x.m.networkID(x.r, e.t)))
		} else {
			x.apply(e.t, x.pol.NetworkChanged(x.at(e.t)))
		}
	case evOutageStart:
		if x.cur == failover.PrimaryIndex && x.exposedTo(e.arg, e.t) {
			x.detectOn[e.arg] = e.t
			x.firstFail[e.arg] = -1
		}
	case evPhaseStart:
		if x.phRecov[e.arg] >= 0 {
			x.phase.unrecovered++
			x.phRecov[e.arg] = -1
		}
		if x.cur == failover.PrimaryIndex && x.exposedTo(e.arg, e.t) {
			x.phDetect[e.arg] = e.t
		}
	case evPhaseEnd:
		if x.phDetect[e.arg] >= 0 {
			x.phase.undetected++
			x.phDetect[e.arg] = -1
		}
		if x.cur != failover.PrimaryIndex && x.exposedTo(e.arg, e.t) {
			x.phRecov[e.arg] = e.t
		}
	case evOutageEnd:
		if x.detectOn[e.arg] >= 0 {
			x.undet++
			x.detectOn[e.arg] = -1
		}
		if x.cur != failover.PrimaryIndex && x.exposedTo(e.arg, e.t) {
			x.recovOn[e.arg] = e.t
			x.period[e.arg] = -1
			if ra, ok := x.pol.(interface{ RecoveryAt() time.Time }); ok && x.backupAt >= 0 {
				if p := int64(ra.RecoveryAt().Sub(Epoch)) - x.backupAt; p > 0 {
					x.period[e.arg] = p
				}
			}
		}
	}
}

// exposedTo reports whether outage k covers the session's current network.
func (x *runner) exposedTo(k int, t int64) bool {
	o := &x.m.outages[k]
	return o.networks == 0 || o.networks&(1<<x.r.segAt(t).net) != 0
}

func (x *runner) handle(e event) {
	switch e.kind {
	case evWake:
		if e.gen == x.wakeGen {
			x.wakeAt = -1
			x.apply(e.t, x.pol.Tick(x.at(e.t)))
		}
	case evRequestDone:
		if e.domain == failover.PrimaryIndex && e.out.Network() {
			for k, s := range x.detectOn {
				if s >= 0 && x.firstFail[k] < 0 {
					x.firstFail[k] = e.t
				}
			}
		}
		if e.gen == x.launch {
			x.apply(e.t, x.pol.Report(x.at(e.t), int(e.domain), outcome.Of(e.out)))
		}
	case evCanaryDone:
		if e.gen == x.launch {
			x.apply(e.t, x.pol.CanaryDone(x.at(e.t), int(e.domain), outcome.Of(e.out)))
		}
	}
}

// apply carries out a policy's Action, as the Transport would.
func (x *runner) apply(t int64, a failover.Action) {
	if x.aware != nil {
		if g := x.aware.MemoryGen(); g != x.histGen { // persisted, as the Store does
			x.histGen = g
			x.hist = append(x.hist[:0], x.aware.Memory()...)
		}
	}
	if tr := a.Transition; tr.Changed() {
		if k := transitionIndex(tr); k >= 0 {
			x.st.transitions[k]++
		}
		switch tr.To {
		case failover.Backup:
			x.restored = tr.Domain
			x.backupAt = t
		case failover.Primary:
			x.restored = failover.None
		}
	}
	if d := x.pol.Domain(); d != x.cur {
		x.cur = d
		if d != failover.PrimaryIndex {
			x.st.failovers++
			for k, s := range x.detectOn {
				if s >= 0 {
					x.detect = append(x.detect, t-s)
					if f := x.firstFail[k]; f >= 0 {
						x.detectFF = append(x.detectFF, t-f)
					}
					x.detectOn[k] = -1
				}
			}
			for k, s := range x.phDetect {
				if s >= 0 {
					x.phase.detect = append(x.phase.detect, t-s)
					x.phDetect[k] = -1
				}
			}
		} else {
			for k, s := range x.phRecov {
				if s >= 0 {
					x.phase.recover = append(x.phase.recover, t-s)
					x.phRecov[k] = -1
				}
			}
			for k, s := range x.recovOn {
				if s >= 0 {
					x.recover = append(x.recover, t-s)
					if p := x.period[k]; p > 0 {
						x.periods++
						if t-s <= 2*p {
							x.within++
						}
					}
					x.recovOn[k] = -1
				}
			}
		}
	}
	if a.Canary != failover.None && a.Canary >= 0 && a.Canary < len(x.m.domains) {
		x.canary(t, a.Canary)
	}
	// Every Action's Wake replaces the pending one; the zero time cancels
	// it. An unchanged wake-up is not scheduled again.
	w := int64(-1)
	if !a.Wake.IsZero() {
		w = max(int64(a.Wake.Sub(Epoch)), t)
	}
	if w != x.wakeAt {
		x.wakeAt = w
		x.wakeGen++
		if w >= 0 {
			x.h.push(event{t: w, kind: evWake, gen: x.wakeGen})
		}
	}
}

func (x *runner) request(t int64, q *request) {
	d := x.pol.Domain()
	x.st.requests++
	x.st.domainReqs[d]++
	k, lat, quic := x.attempt(t, d, int(q.net), q.flags, float64(q.rttF), q.server, q.flags&flagQUICBlocked != 0)
	b := &x.tl[int(t/int64(time.Minute))-x.tlFrom]
	b.requests++
	if d == failover.PrimaryIndex {
		b.primary++
	}
	if k != outcome.Success {
		b.errors++
	}
	switch {
	case k == outcome.Success:
		x.st.successes++
		if quic {
			x.st.quic++
		}
		x.latency(lat / 1000)
	default:
		x.st.errors++
	}
	x.h.push(event{t: t + lat, kind: evRequestDone, domain: int8(d), out: k, gen: x.launch})
}

// canary sends a canary to domain d at t, with its own draws.
func (x *runner) canary(t int64, d int) {
	x.st.canaries++
	r := x.r
	n := x.canaryN * 8
	x.canaryN++
	seg := r.segAt(t)
	nm := &x.m.nets[seg.net]
	var flags uint8
	loss := nm.lossGood
	if in(r.bad, t) {
		flags |= flagBad
		loss = nm.lossBad
		if unitAt(r.canaryKey, n+5) < nm.retx {
			flags |= flagRetx
		}
	}
	switch {
	case in(r.down, t):
		flags |= flagOffline
	case unitAt(r.canaryKey, n) < loss:
		flags |= flagLost
	}
	rttF := lognormalOf(unitAt(r.canaryKey, n+1), unitAt(r.canaryKey, n+2), 1, nm.jitter)
	k, lat, _ := x.attempt(t, d, seg.net, flags, rttF, x.m.serverCanary, seg.quicBlocked)
	if lat > x.m.canaryTO {
		k, lat = outcome.ResponseTimeout, x.m.canaryTO
	}
	x.h.push(event{t: t + lat, kind: evCanaryDone, domain: int8(d), out: k, gen: x.launch})
}
