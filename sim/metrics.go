package sim

import (
	"math"
	"slices"

	"github.com/veerhq/veer/failover"
)

// acc accumulates the measurements of one strategy over a group of
// sessions. Every field is an integer (or a list sorted before use), so
// merging the accumulators of parallel workers in any order gives
// byte-identical results.
type acc struct {
	sessions   int64
	requests   int64
	errors     int64
	successes  int64
	quic       int64
	canaries   int64
	failovers  int64
	trans      [numTransitions]int64
	domainReqs []int64
	perSession []int64 // perSession[k] = sessions with k failover events
	lat        hist    // latency of successful requests, µs
	detect     []int64 // ns
	detectFF   []int64 // ns
	recover    []int64 // ns
	within     int64
	periods    int64
	tl         []tlBucket // per minute of the horizon
	undetected int64
	censored   int64
	phase      phaseAcc // per down phase of flapping outages
}

// phaseAcc holds the per-down-phase measurements of flapping outages: a
// detection starts at a down phase's start and must happen before that
// phase ends; a recovery starts at its end and must happen before the next
// down phase starts.
type phaseAcc struct {
	detect      []int64 // ns
	recover     []int64 // ns
	undetected  int64   // still on primary when the down phase ended
	unrecovered int64   // still off primary when the next down phase began
	censored    int64   // the session ended during the up phase, off primary
}

func (p *phaseAcc) add(o *phaseAcc) {
	p.detect = append(p.detect, o.detect...)
	p.recover = append(p.recover, o.recover...)
	p.undetected += o.undetected
	p.unrecovered += o.unrecovered
	p.censored += o.censored
}

func (p *phaseAcc) reset() {
	*p = phaseAcc{detect: p.detect[:0], recover: p.recover[:0]}
}

func newAcc(domains int) *acc { return &acc{domainReqs: make([]int64, domains)} }

func (a *acc) merge(o *acc) {
	a.sessions += o.sessions
	a.requests += o.requests
	a.errors += o.errors
	a.successes += o.successes
	a.quic += o.quic
	a.canaries += o.canaries
	a.failovers += o.failovers
	for i, v := range o.trans {
		a.trans[i] += v
	}
	for i, v := range o.domainReqs {
		a.domainReqs[i] += v
	}
	for k, v := range o.perSession {
		a.addSessions(k, v)
	}
	a.lat.merge(&o.lat)
	a.addTimeline(0, o.tl)
	a.detect = append(a.detect, o.detect...)
	a.detectFF = append(a.detectFF, o.detectFF...)
	a.recover = append(a.recover, o.recover...)
	a.within += o.within
	a.periods += o.periods
	a.undetected += o.undetected
	a.censored += o.censored
	a.phase.add(&o.phase)
}

func (a *acc) addSessions(failovers int, n int64) {
	for len(a.perSession) <= failovers {
		a.perSession = append(a.perSession, 0)
	}
	a.perSession[failovers] += n
}

// tlBucket counts one minute's regular requests.
type tlBucket struct{ requests, primary, errors int64 }

// addTimeline adds buckets that start at minute from.
func (a *acc) addTimeline(from int, bs []tlBucket) {
	for len(a.tl) < from+len(bs) {
		a.tl = append(a.tl, tlBucket{})
	}
	for i, b := range bs {
		t := &a.tl[from+i]
		t.requests += b.requests
		t.primary += b.primary
		t.errors += b.errors
	}
}

// Timeline is a per-minute series of regular requests: Minute[i] is the
// minute of the horizon, and the other slices hold that minute's values.
// Minutes without requests are left out.
type Timeline struct {
	Minute       []int     `json:"minute"`
	Requests     []int64   `json:"requests"`
	PrimaryShare []float64 `json:"primary_share"`
	ErrorRate    []float64 `json:"error_rate"`
}

func (a *acc) timeline() *Timeline {
	tl := &Timeline{Minute: []int{}, Requests: []int64{}, PrimaryShare: []float64{}, ErrorRate: []float64{}}
	for m, b := range a.tl {
		if b.requests == 0 {
			continue
		}
		tl.Minute = append(tl.Minute, m)
		tl.Requests = append(tl.Requests, b.requests)
		tl.PrimaryShare = append(tl.PrimaryShare, ratio(b.primary, b.requests))
		tl.ErrorRate = append(tl.ErrorRate, ratio(b.errors, b.requests))
	}
	return tl
}

// sessionStats are one session's counts under one strategy.
type sessionStats struct {
	requests  int64
	errors    int64
	successes int64
	quic      int64
	canaries  int64
	failovers int
	// transitions counts state changes by (from, to, reason).
	transitions [numTransitions]int64
	domainReqs  [maxDomains]int64
}

const maxDomains = 17

func (a *acc) addSession(s *sessionStats) {
	a.sessions++
	a.requests += s.requests
	a.errors += s.errors
	a.successes += s.successes
	a.quic += s.quic
	a.canaries += s.canaries
	a.failovers += int64(s.failovers)
	for i, v := range s.transitions {
		a.trans[i] += v
	}
	for i := range a.domainReqs {
		a.domainReqs[i] += s.domainReqs[i]
	}
	a.addSessions(s.failovers, 1)
}

// Stats are the measurements of one strategy over a group of sessions.
type Stats struct {
	Sessions int64 `json:"sessions"`
	Requests int64 `json:"requests"`
	// PrimaryShare is the share of regular requests sent to the primary.
	PrimaryShare float64 `json:"primary_share"`
	// DomainShare is the share of regular requests per domain.
	DomainShare map[string]float64 `json:"domain_share"`
	// ErrorRate is the share of regular requests that failed (network
	// failures and server errors).
	ErrorRate float64 `json:"error_rate"`
	// FailoversPerSession counts moves of regular traffic onto a backup
	// domain per session.
	FailoversPerSession Dist `json:"failovers_per_session"`
	// LatencyMs are percentiles of successful requests' latency,
	// including connection set-up, in milliseconds.
	LatencyMs Percentiles `json:"latency_ms"`
	// QUICShare is the share of successful requests carried over QUIC.
	QUICShare float64 `json:"quic_share"`
	// CanariesPerSession is the mean number of canaries per session.
	CanariesPerSession float64 `json:"canaries_per_session"`
	// DetectSeconds is the median time from the start of a primary outage
	// to the session's traffic leaving the primary, over sessions on
	// primary when it started; null when no session detected one.
	DetectSeconds *float64 `json:"detect_seconds"`
	// DetectAfterFirstFailureSeconds is the same median counted from the
	// session's first network failure on primary after the outage began:
	// the policy's own reaction time, without the wait for traffic.
	DetectAfterFirstFailureSeconds *float64 `json:"detect_after_first_failure_seconds"`
	// RecoverSeconds is the median time from the end of a primary outage
	// to the session's traffic returning to primary, over sessions off
	// primary when it ended; null when none returned.
	RecoverSeconds *float64 `json:"recover_seconds"`
	// RecoverWithinTwoPeriods is the share of recoveries that took at
	// most twice the recovery delay in effect when the outage ended;
	// null for policies without a recovery timer.
	RecoverWithinTwoPeriods *float64 `json:"recover_within_two_periods"`
	// Detected and Undetected count exposed sessions that left / did not
	// leave the primary before the outage ended; Recovered and Censored
	// those that returned / ended their session first.
	Detected   int64 `json:"detected"`
	Undetected int64 `json:"undetected"`
	Recovered  int64 `json:"recovered"`
	Censored   int64 `json:"censored"`
	// Phases measures flapping outages (a flap section) per down phase;
	// null in a scenario without one.
	Phases *PhaseStats `json:"phases"`
}

// PhaseStats measures each down phase of flapping primary outages
// separately. Detection counts from a down phase's start, over exposed
// sessions on primary then, and succeeds only if traffic leaves the primary
// before that phase ends (Undetected otherwise). Recovery counts from a down
// phase's end, over exposed sessions off primary then, and succeeds only if
// traffic is back on primary before the next down phase starts (Unrecovered
// otherwise; Censored when the session ended first). After the last down
// phase the next one never comes, so recovery runs to the session's end.
type PhaseStats struct {
	DetectSeconds  *float64 `json:"detect_seconds"`
	RecoverSeconds *float64 `json:"recover_seconds"`
	Detected       int64    `json:"detected"`
	Undetected     int64    `json:"undetected"`
	Recovered      int64    `json:"recovered"`
	Unrecovered    int64    `json:"unrecovered"`
	Censored       int64    `json:"censored"`
}

// Dist summarises a per-session count.
type Dist struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
}

// Percentiles of a latency distribution.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// stats summarises a; flapping says whether the scenario has a flapping
// primary outage (which adds Phases).
func (a *acc) stats(domains []string, flapping bool) Stats {
	s := Stats{Sessions: a.sessions, Requests: a.requests, DomainShare: map[string]float64{}}
	s.PrimaryShare = ratio(a.domainReqs[0], a.requests)
	for i, d := range domains {
		s.DomainShare[d] = ratio(a.domainReqs[i], a.requests)
	}
	s.ErrorRate = ratio(a.errors, a.requests)
	s.FailoversPerSession = Dist{
		Mean: round(ratio(a.failovers, a.sessions), 4),
		P50:  countQuantile(a.perSession, a.sessions, 0.5),
		P90:  countQuantile(a.perSession, a.sessions, 0.9),
		P99:  countQuantile(a.perSession, a.sessions, 0.99),
	}
	s.LatencyMs = Percentiles{
		P50: round(a.lat.quantile(0.50)/1000, 1),
		P95: round(a.lat.quantile(0.95)/1000, 1),
		P99: round(a.lat.quantile(0.99)/1000, 1),
	}
	s.QUICShare = ratio(a.quic, a.successes)
	s.CanariesPerSession = round(ratio(a.canaries, a.sessions), 4)
	s.DetectSeconds = median(a.detect)
	s.RecoverSeconds = median(a.recover)
	s.DetectAfterFirstFailureSeconds = median(a.detectFF)
	if a.periods > 0 {
		v := ratio(a.within, a.periods)
		s.RecoverWithinTwoPeriods = &v
	}
	s.Detected = int64(len(a.detect))
	s.Undetected = a.undetected
	s.Recovered = int64(len(a.recover))
	s.Censored = a.censored
	s.Phases = a.phaseStats(flapping)
	return s
}

// phaseStats returns the per-phase measurements, or nil when the scenario
// has no flapping primary outage.
func (a *acc) phaseStats(flapping bool) *PhaseStats {
	if !flapping {
		return nil
	}
	p := &a.phase
	return &PhaseStats{
		DetectSeconds:  median(p.detect),
		RecoverSeconds: median(p.recover),
		Detected:       int64(len(p.detect)),
		Undetected:     p.undetected,
		Recovered:      int64(len(p.recover)),
		Unrecovered:    p.unrecovered,
		Censored:       p.censored,
	}
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return round(float64(a)/float64(b), 6)
}

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}

// countQuantile is the q-quantile of a distribution given as counts per
// value (nearest rank).
func countQuantile(counts []int64, n int64, q float64) float64 {
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	var seen int64
	for v, c := range counts {
		seen += c
		if seen >= rank {
			return float64(v)
		}
	}
	return float64(len(counts) - 1)
}

// median of durations in ns, in seconds rounded to ms; nil when empty.
func median(ns []int64) *float64 {
	if len(ns) == 0 {
		return nil
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	var m float64
	if n := len(s); n%2 == 1 {
		m = float64(s[n/2])
	} else {
		m = (float64(s[n/2-1]) + float64(s[n/2])) / 2
	}
	v := round(m/1e9, 3)
	return &v
}

// Transitions are counted per (from, to, reason) in a fixed array.
const (
	numStates      = 4
	numReasons     = 16
	numTransitions = numStates * numStates * numReasons
)

func transitionIndex(t failover.Transition) int {
	if int(t.From) >= numStates || int(t.To) >= numStates || int(t.Reason) >= numReasons {
		return -1
	}
	return (int(t.From)*numStates+int(t.To))*numReasons + int(t.Reason)
}

// transitions returns the non-zero counts keyed "from>to:reason".
func (a *acc) transitions() map[string]int64 {
	out := map[string]int64{}
	for i, v := range a.trans {
		if v == 0 {
			continue
		}
		r := failover.Reason(i % numReasons)
		ft := i / numReasons
		from, to := failover.State(ft/numStates), failover.State(ft%numStates)
		out[from.String()+">"+to.String()+":"+r.String()] = v
	}
	return out
}
