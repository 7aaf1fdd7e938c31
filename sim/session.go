package sim

import (
	"math"
	"slices"
)

// realisation is everything about one session that does not depend on the
// strategy: who the user is, when the app sends requests, what the device's
// own network does and which outages can touch it. It is generated once per
// session and replayed for every strategy, which is what makes the
// comparison paired.
type realisation struct {
	index          int
	start, end     int64
	carrier        int
	region         int
	class          int
	quality        float64
	segs           []netSeg
	bad            []span // Gilbert-Elliott bad-state periods
	down           []span // device offline: tunnels (and trace gaps above trace_gaps.outage_above)
	stall          []span // trace gaps that delay packets (sorted, disjoint)
	kills          []int64
	events         []sessEvent
	reqs           []request
	outages        []int // indices into model.outages that match the scope
	devErrors      int   // requests the device's own network failed
	canaryKey      uint64
	scratchTunnels []span
	scratchStall   []span
}

type netSeg struct {
	from        int64
	net         int
	quicBlocked bool
}

// request is one regular request of the app with its strategy-independent
// draws.
type request struct {
	t      int64
	rttF   float32 // log-normal jitter factor on round trips
	net    uint8
	flags  uint8
	server int64 // server time, ns
}

const (
	flagBad uint8 = 1 << iota
	flagLost
	flagOffline
	flagRetx
	flagQUICBlocked
)

type sessEventKind uint8

const (
	evRelaunch sessEventKind = iota + 1
	evNetChange
	evOutageStart
	evOutageEnd
	evPhaseStart // a down phase of a flapping primary outage begins
	evPhaseEnd   // ... and ends
)

type sessEvent struct {
	t    int64
	kind sessEventKind
	arg  int // outage index for outage events
}

// generate fills r with session i's realisation under seed.
func (m *model) generate(r *realisation, seed uint64, i int) {
	*r = realisation{
		index: i, segs: r.segs[:0], bad: r.bad[:0], down: r.down[:0], stall: r.stall[:0], kills: r.kills[:0],
		events: r.events[:0], reqs: r.reqs[:0], outages: r.outages[:0], scratchTunnels: r.scratchTunnels[:0],
		scratchStall: r.scratchStall[:0],
	}
	a := newRNG(streamKey(seed, i, streamAttrs))
	r.start = int64(a.float() * float64(m.horizon))
	r.end = r.start + m.durMin + int64(a.float()*float64(m.durSpan))
	r.carrier = pick(a.float(), m.carrierW, m.carrierTotal)
	r.region = pick(a.float(), m.regionW, m.regionTotal)
	r.class = pick(a.float(), m.classW, m.classTotal)
	r.quality = lognormalOf(a.float(), a.float(), 1, m.quality) * m.carrierQ[r.carrier] * m.regionQ[r.region]
	r.canaryKey = streamKey(seed, i, streamCanary)

	// Network segments: an initial network, then Poisson changes to
	// another network type.
	nc := newRNG(streamKey(seed, i, streamNetChange))
	net := pick(a.float(), m.netW, m.netTotal)
	r.segs = append(r.segs, netSeg{from: r.start, net: net, quicBlocked: nc.float() < m.nets[net].quicBlocked})
	if m.netChg > 0 && len(m.nets) > 1 {
		for t := r.start + int64(nc.exp(1/m.netChg)); t < r.end; t += int64(nc.exp(1 / m.netChg)) {
			prev := net
			// Pick among the other networks by share.
			total := m.netTotal - m.netW[prev]
			if total <= 0 {
				continue
			}
			x := nc.float() * total
			for j, w := range m.netW {
				if j == prev {
					continue
				}
				net = j
				if x < w {
					break
				}
				x -= w
			}
			r.segs = append(r.segs, netSeg{from: t, net: net, quicBlocked: nc.float() < m.nets[net].quicBlocked})
			r.events = append(r.events, sessEvent{t: t, kind: evNetChange})
			r.kills = append(r.kills, t)
		}
	}

	// Gilbert-Elliott: alternating exponential sojourns per segment,
	// starting in the stationary distribution. The session's quality
	// multiplier makes bad periods more frequent.
	ge := newRNG(streamKey(seed, i, streamGE))
	tu := newRNG(streamKey(seed, i, streamTunnels))
	tr := newRNG(streamKey(seed, i, streamTrace))
	for k, sg := range r.segs {
		segEnd := r.end
		if k+1 < len(r.segs) {
			segEnd = r.segs[k+1].from
		}
		nm := &m.nets[sg.net]
		good := nm.goodMean / r.quality
		bad := ge.float() < nm.badMean/(good+nm.badMean)
		for t := sg.from; t < segEnd; {
			mean := good
			if bad {
				mean = nm.badMean
			}
			next := t + int64(ge.exp(mean)) + 1
			if bad {
				r.bad = append(r.bad, span{t, min(next, segEnd)})
			}
			t = next
			bad = !bad
		}
		// Tunnels: Poisson with the network's rate scaled by quality,
		// durations log-uniform.
		if rate := nm.tunnelRate * r.quality; rate > 0 {
			for t := sg.from + int64(tu.exp(1/rate)); t < segEnd; t += int64(tu.exp(1 / rate)) {
				d := int64(math.Exp(m.tunMin + tu.float()*(m.tunMax-m.tunMin)))
				r.scratchTunnels = append(r.scratchTunnels, span{t, min(t+d, r.end)})
				t += d
			}
		}
		// Trace gaps, for sessions assigned a trace on this network: one
		// draw picks at most one trace, each with its own share.
		if len(nm.traceIdx) > 0 {
			u := tr.float()
			for j, ti := range nm.traceIdx {
				if u >= nm.traceCum[j] {
					continue
				}
				t := m.traces[ti].t
				off := int64(tr.float() * float64(t.Period))
				r.scratchTunnels, r.stall = t.gapsIn(r.scratchTunnels, r.stall, sg.from, off, segEnd-sg.from, m.outageAbove)
				break
			}
		}
	}
	r.down = mergeSpans(r.down, r.scratchTunnels)
	// Stalls during an outage are the outage; the rest stay sorted.
	r.stall = mergeSpans(r.scratchStall[:0], r.stall)
	r.scratchStall, r.stall = r.stall, r.scratchStall[:0]
	for _, s := range r.scratchStall {
		if !in(r.down, s.from) {
			r.stall = append(r.stall, s)
		}
	}
	for _, d := range r.down {
		r.kills = append(r.kills, d.from)
	}

	// Relaunches.
	rl := newRNG(streamKey(seed, i, streamRelaunch))
	if m.relaunch > 0 {
		for t := r.start + int64(rl.exp(1/m.relaunch)); t < r.end; t += int64(rl.exp(1 / m.relaunch)) {
			r.events = append(r.events, sessEvent{t: t, kind: evRelaunch})
			r.kills = append(r.kills, t)
		}
	}

	// Outages in scope.
	for k := range m.outages {
		o := &m.outages[k]
		if !o.scope(r.carrier, r.region) || o.to <= r.start || o.from >= r.end {
			continue
		}
		r.outages = append(r.outages, k)
		if o.primary {
			if o.from >= r.start {
				r.events = append(r.events, sessEvent{t: o.from, kind: evOutageStart, arg: k})
			}
			if o.to < r.end {
				r.events = append(r.events, sessEvent{t: o.to, kind: evOutageEnd, arg: k})
			}
			if len(o.down) > 1 {
				for _, d := range o.down {
					if d.from >= r.start && d.from < r.end {
						r.events = append(r.events, sessEvent{t: d.from, kind: evPhaseStart, arg: k})
					}
					if d.to >= r.start && d.to < r.end {
						r.events = append(r.events, sessEvent{t: d.to, kind: evPhaseEnd, arg: k})
					}
				}
			}
		}
	}
	slices.SortStableFunc(r.events, func(x, y sessEvent) int { return cmpInt64(x.t, y.t) })
	slices.Sort(r.kills)

	// Requests: a phased Poisson process.
	ar := newRNG(streamKey(seed, i, streamArrivals))
	cm := &m.classes[r.class]
	ph := pick(ar.float(), cm.weight, cm.total)
	phaseEnd := r.start + int64(ar.exp(cm.phases[ph].meanDur))
	reqKey := streamKey(seed, i, streamRequest)
	seg, badI, downI := 0, 0, 0
	for t := r.start; ; {
		gap := cm.phases[ph].meanGap
		next := phaseEnd
		if !math.IsInf(gap, 1) {
			next = t + int64(ar.exp(gap))
		}
		if next >= phaseEnd {
			// Memoryless: restart the clock at the phase boundary.
			t = phaseEnd
			ph = (ph + 1) % len(cm.phases)
			phaseEnd = t + int64(ar.exp(cm.phases[ph].meanDur)) + 1
			if t >= r.end {
				break
			}
			continue
		}
		t = next
		if t >= r.end {
			break
		}
		for seg+1 < len(r.segs) && r.segs[seg+1].from <= t {
			seg++
		}
		for badI < len(r.bad) && r.bad[badI].to <= t {
			badI++
		}
		for downI < len(r.down) && r.down[downI].to <= t {
			downI++
		}
		n := uint64(len(r.reqs)) * 8
		nm := &m.nets[r.segs[seg].net]
		q := request{t: t, net: uint8(r.segs[seg].net)}
		if r.segs[seg].quicBlocked {
			q.flags |= flagQUICBlocked
		}
		q.rttF = float32(lognormalOf(unitAt(reqKey, n+1), unitAt(reqKey, n+2), 1, nm.jitter))
		q.server = int64(lognormalOf(unitAt(reqKey, n+3), unitAt(reqKey, n+4), m.serverMedian, m.serverSigma))
		loss := nm.lossGood
		if badI < len(r.bad) && r.bad[badI].from <= t {
			q.flags |= flagBad
			loss = nm.lossBad
			if unitAt(reqKey, n+5) < nm.retx {
				q.flags |= flagRetx
			}
		}
		switch {
		case downI < len(r.down) && r.down[downI].from <= t:
			q.flags |= flagOffline
			r.devErrors++
		case r.stallDelay(t, m.rto) >= m.reqTimeout:
			r.devErrors++ // a gap that outlasts the request's timeout
			if unitAt(reqKey, n) < loss {
				q.flags |= flagLost
			}
		case unitAt(reqKey, n) < loss:
			q.flags |= flagLost
			r.devErrors++
		}
		r.reqs = append(r.reqs, q)
	}
}

// stallDelay is the retransmission delay of a packet sent at t, 0 outside
// the trace gaps that delay packets.
func (r *realisation) stallDelay(t, rto int64) int64 {
	if len(r.stall) == 0 {
		return 0
	}
	i, _ := slices.BinarySearchFunc(r.stall, t, func(s span, t int64) int { return cmpInt64(s.to, t+1) })
	if i < len(r.stall) && r.stall[i].from <= t && t < r.stall[i].to {
		return stallDelay(t, r.stall[i].to, rto)
	}
	return 0
}

// segAt returns the network segment at t (binary search; for canaries).
func (r *realisation) segAt(t int64) *netSeg {
	i, _ := slices.BinarySearchFunc(r.segs, t, func(s netSeg, t int64) int { return cmpInt64(s.from, t+1) })
	if i == 0 {
		return &r.segs[0]
	}
	return &r.segs[i-1]
}

// in reports whether t falls in one of the sorted, disjoint spans.
func in(spans []span, t int64) bool {
	i, _ := slices.BinarySearchFunc(spans, t, func(s span, t int64) int { return cmpInt64(s.to, t+1) })
	return i < len(spans) && spans[i].from <= t && t < spans[i].to
}

// mergeSpans appends to dst the union of spans (sorted and merged).
func mergeSpans(dst, spans []span) []span {
	slices.SortFunc(spans, func(x, y span) int { return cmpInt64(x.from, y.from) })
	for _, s := range spans {
		if n := len(dst); n > 0 && s.from <= dst[n-1].to {
			dst[n-1].to = max(dst[n-1].to, s.to)
			continue
		}
		dst = append(dst, s)
	}
	return dst
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
