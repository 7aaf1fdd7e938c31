package sim

import (
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/veerhq/veer/failover"
)

// model is a Scenario compiled for fast simulation: durations in
// nanoseconds, names resolved to indices, traces loaded.
type model struct {
	sc       *Scenario
	horizon  int64
	durMin   int64
	durSpan  int64
	relaunch float64 // per ns
	netChg   float64 // per ns

	classes      []classModel
	classW       []float64
	classTotal   float64
	nets         []netModel
	netW         []float64
	netTotal     float64
	quality      float64
	tunMin       float64 // log of ns
	tunMax       float64
	traces       []traceModel
	carrierW     []float64
	carrierQ     []float64
	regionQ      []float64
	carrierTotal float64
	regionW      []float64
	regionTotal  float64
	domains      []domainModel
	serverMedian float64
	serverSigma  float64
	serverCanary int64
	dnsTimeout   int64
	dialTimeout  int64
	reqTimeout   int64
	idle         int64
	dnsTTL       int64
	rtoMin       float64
	canaryTO     int64
	netIDs       []string // carrier × network names, for networkID
	traceStats   []TraceStats
	rto          int64 // first retransmission timeout in a trace gap
	outageAbove  int64 // trace gaps at least this long are outages; 0: none
	outages      []outageModel
}

type classModel struct {
	phases []phaseModel
	weight []float64 // for picking the starting phase: mean durations
	total  float64
}

type phaseModel struct {
	meanGap float64 // ns between arrivals; +Inf for a silent phase
	meanDur float64 // ns
}

type netModel struct {
	name              string
	rtt               float64 // ns
	jitter            float64
	goodMean, badMean float64 // ns
	lossGood, lossBad float64
	retx, quicBlocked float64
	tunnelRate        float64   // per ns
	traceIdx          []int     // traces that apply to this network
	traceCum          []float64 // their cumulative shares (at most 1)
}

// networkID is the network a session is on at t as its app reports it:
// carrier and network type ("C4/lte").
func (m *model) networkID(r *realisation, t int64) string {
	return m.netIDs[r.carrier*len(m.nets)+r.segAt(t).net]
}

type traceModel struct {
	t     *Trace
	share float64
}

type domainModel struct {
	name  string
	extra float64
	quic  bool
}

type outageModel struct {
	name       string
	kind       string
	from, to   int64
	down       []span // down phases, sorted; one span unless flapping
	domainMask uint32
	carriers   uint64 // bit set; 0 = all
	regions    uint64
	networks   uint64
	primary    bool // affects the primary with a network kind: detect/recover are measured
}

type span struct{ from, to int64 }

func compile(sc *Scenario, dir string) (*model, error) {
	// Validate a copy: it loads the traces relative to dir.
	cp := *sc
	if dir != sc.dir {
		cp.dir, cp.traces, cp.tracesKey = dir, nil, ""
	}
	if err := cp.Validate(); err != nil {
		return nil, err
	}
	loaded := cp.traces
	stats, err := cp.TraceStats()
	if err != nil {
		return nil, err
	}
	m := &model{
		sc:           sc,
		horizon:      int64(sc.Horizon),
		durMin:       int64(sc.Session.DurationMin),
		durSpan:      int64(sc.Session.DurationMax - sc.Session.DurationMin),
		relaunch:     sc.Session.RelaunchesPerHour / float64(time.Hour),
		netChg:       sc.Session.NetworkChangesPerHour / float64(time.Hour),
		quality:      sc.QualitySigma,
		tunMin:       math.Log(float64(sc.Tunnels.Min)),
		tunMax:       math.Log(float64(sc.Tunnels.Max)),
		serverMedian: float64(sc.Server.Median),
		serverSigma:  sc.Server.Sigma,
		serverCanary: int64(sc.Server.Canary),
		dnsTimeout:   int64(sc.Timeouts.DNS),
		dialTimeout:  int64(sc.Timeouts.Dial),
		reqTimeout:   int64(sc.Timeouts.Request),
		idle:         int64(sc.Timeouts.Idle),
		dnsTTL:       int64(sc.Timeouts.DNSTTL),
		rtoMin:       float64(sc.Timeouts.TCPRTOMin),
		canaryTO:     int64(sc.Failover.CanaryTimeout),
		traceStats:   stats,
		rto:          int64(sc.TraceGaps.withDefaults().InitialRTO),
		outageAbove:  int64(sc.TraceGaps.OutageAbove),
	}
	if m.canaryTO == 0 {
		m.canaryTO = int64(failover.DefaultCanaryTimeout)
	}
	for _, c := range sc.Traffic {
		cm := classModel{}
		for _, p := range c.Phases {
			gap := math.Inf(1)
			if p.RatePerMinute > 0 {
				gap = float64(time.Minute) / p.RatePerMinute
			}
			cm.phases = append(cm.phases, phaseModel{meanGap: gap, meanDur: float64(p.MeanDuration)})
			cm.weight = append(cm.weight, float64(p.MeanDuration))
			cm.total += float64(p.MeanDuration)
		}
		m.classes = append(m.classes, cm)
		m.classW = append(m.classW, c.Share)
		m.classTotal += c.Share
	}
	for _, n := range sc.Networks {
		m.nets = append(m.nets, netModel{
			name: n.Name, rtt: float64(n.RTT), jitter: n.JitterSigma,
			goodMean: float64(n.GoodMean), badMean: float64(n.BadMean),
			lossGood: n.LossGood, lossBad: n.LossBad, retx: n.RetransmitBad,
			quicBlocked: n.QUICBlocked, tunnelRate: n.TunnelsPerHour / float64(time.Hour),
		})
		m.netW = append(m.netW, n.Share)
		m.netTotal += n.Share
	}
	for i, ts := range sc.Traces {
		t := loaded[i]
		m.traces = append(m.traces, traceModel{t: t, share: ts.Share})
		for ni := range m.nets {
			if len(ts.Networks) == 0 || slices.Contains(ts.Networks, m.nets[ni].name) {
				cum := ts.Share
				if k := len(m.nets[ni].traceCum); k > 0 {
					cum += m.nets[ni].traceCum[k-1]
				}
				m.nets[ni].traceIdx = append(m.nets[ni].traceIdx, i)
				m.nets[ni].traceCum = append(m.nets[ni].traceCum, cum)
			}
		}
	}
	for _, c := range sc.Carriers {
		for _, n := range sc.Networks {
			m.netIDs = append(m.netIDs, c.Name+"/"+n.Name)
		}
		m.carrierW = append(m.carrierW, c.Share)
		m.carrierQ = append(m.carrierQ, qualityOr1(c.Quality))
		m.carrierTotal += c.Share
	}
	for _, r := range sc.Regions {
		m.regionW = append(m.regionW, r.Share)
		m.regionQ = append(m.regionQ, qualityOr1(r.Quality))
		m.regionTotal += r.Share
	}
	for _, d := range sc.domains() {
		m.domains = append(m.domains, domainModel{name: d.Name, extra: float64(d.ExtraRTT), quic: d.QUIC})
	}
	for _, o := range sc.Outages {
		om := outageModel{name: o.Name, kind: o.Kind, from: int64(o.Start), to: int64(o.End)}
		if om.name == "" {
			om.name = o.Kind
		}
		doms := o.Domains
		if len(doms) == 0 {
			doms = []string{"primary"}
		}
		for _, d := range doms {
			switch d {
			case "primary":
				om.domainMask |= 1
			case "backups":
				om.domainMask |= (uint32(1)<<len(m.domains) - 1) &^ 1
			default:
				om.domainMask |= 1 << sc.domainIndex(d)
			}
		}
		for _, c := range o.Carriers {
			om.carriers |= 1 << weightedIndex(sc.Carriers, c)
		}
		for _, r := range o.Regions {
			om.regions |= 1 << weightedIndex(sc.Regions, r)
		}
		for _, n := range o.Networks {
			om.networks |= 1 << sc.network(n)
		}
		if o.Flap == nil {
			om.down = []span{{om.from, om.to}}
		} else {
			for t := om.from; t < om.to; t += int64(o.Flap.Down + o.Flap.Up) {
				om.down = append(om.down, span{t, min(t+int64(o.Flap.Down), om.to)})
			}
		}
		om.primary = om.domainMask&1 != 0 && o.Kind != KindServerError
		m.outages = append(m.outages, om)
	}
	return m, nil
}

// compileFile resolves trace paths relative to the scenario file.
func compileFile(sc *Scenario, file string) (*model, error) {
	dir := sc.dir // ParseScenario's file
	if file != "" {
		dir = filepath.Dir(file)
	}
	return compile(sc, dir)
}

// scope reports whether an outage applies to a session's attributes (the
// network type is checked per request).
func (o *outageModel) scope(carrier, region int) bool {
	return (o.carriers == 0 || o.carriers&(1<<carrier) != 0) &&
		(o.regions == 0 || o.regions&(1<<region) != 0)
}

// downAt reports whether the outage is in a down phase at t.
func (o *outageModel) downAt(t int64) bool {
	if t < o.from || t >= o.to {
		return false
	}
	if len(o.down) == 1 {
		return true
	}
	i, _ := slices.BinarySearchFunc(o.down, t, func(s span, t int64) int {
		switch {
		case s.to <= t:
			return -1
		case s.from > t:
			return 1
		}
		return 0
	})
	return i < len(o.down) && o.down[i].from <= t && t < o.down[i].to
}

func qualityOr1(q float64) float64 {
	if q == 0 {
		return 1
	}
	return q
}
