package release

import (
	"fmt"
	"math"
	"time"
)

// Counts are one version's outcomes in a step, pooled over every gateway.
type Counts struct {
	// Requests the version served in the step (4xx other than 429 are
	// the caller's and not counted at all).
	Requests int64 `json:"requests"`
	// Errors among them: 5xx, 429 and network failures.
	Errors int64 `json:"errors"`
	// Slow: answered after the SLO's SlowThreshold.
	Slow int64 `json:"slow"`
}

// Add returns c + d.
func (c Counts) Add(d Counts) Counts {
	return Counts{Requests: c.Requests + d.Requests, Errors: c.Errors + d.Errors, Slow: c.Slow + d.Slow}
}

// Decision is what the analysis says about a step.
type Decision uint8

// The decisions.
const (
	Continue Decision = iota // not enough evidence yet
	Promote                  // B is as good as A: next step
	Abort                    // B is worse: every tenant back to A
)

func (d Decision) String() string {
	switch d {
	case Promote:
		return "promote"
	case Abort:
		return "abort"
	}
	return "continue"
}

// Verdict is a Decision with the figures that decided it, for the audit log.
type Verdict struct {
	Decision Decision `json:"decision"`
	Reason   string   `json:"reason"`
	A        Counts   `json:"a"`
	B        Counts   `json:"b"`
	// ErrorLLR and SlowLLR are the sequential tests' log-likelihood
	// ratios (positive: evidence that B is worse); Upper and Lower their
	// thresholds.
	ErrorLLR float64 `json:"error_llr"`
	SlowLLR  float64 `json:"slow_llr"`
	Upper    float64 `json:"upper"`
	Lower    float64 `json:"lower"`
}

// rate floors: a version with no error yet is not taken to have a zero
// rate (the test's ratio would be infinite).
const (
	minErrorRate = 1e-4
	minSlowRate  = 1e-3
)

// Judge decides a step from the pooled counts of both versions and the time
// the step has run, with a sequential probability ratio test (Wald) on B's
// error rate and, separately, on its share of slow requests: H0 "B's rate
// is A's", H1 "B's rate is A's plus the SLO's margin". Either test crossing
// its upper bound aborts at once, whatever the sample (a bad version is
// stopped after a handful of failures, not after a fixed wait); both below
// their lower bound with at least MinSamples of B promote. At the step's
// Hold the evidence so far decides: promote when both tests lean to H0
// (ratio <= 0) and MinSamples were seen, else abort (a step that could not
// show B healthy in its time is not promoted).
//
// A's rate is re-estimated from its counts at every call; the tests use
// the current estimate, which A's far larger sample keeps stable.
func Judge(p Plan, a, b Counts, elapsed time.Duration) Verdict {
	p = p.withDefaults()
	s := p.SLO
	v := Verdict{A: a, B: b, Upper: math.Log((1 - s.Beta) / s.Alpha), Lower: math.Log(s.Beta / (1 - s.Alpha))}
	v.ErrorLLR = llr(rate(a.Errors, a.Requests, minErrorRate), s.MaxErrorRate, b.Errors, b.Requests)
	v.SlowLLR = llr(rate(a.Slow, a.Requests, minSlowRate), s.MaxSlowRate, b.Slow, b.Requests)
	figures := fmt.Sprintf("B %d errors and %d slow of %d; A %d and %d of %d", b.Errors, b.Slow, b.Requests, a.Errors, a.Slow, a.Requests)
	enough := b.Requests >= int64(s.MinSamples)
	switch {
	case v.ErrorLLR >= v.Upper:
		v.Decision, v.Reason = Abort, fmt.Sprintf("error rate above A's + %.3g: %s", s.MaxErrorRate, figures)
	case v.SlowLLR >= v.Upper:
		v.Decision, v.Reason = Abort, fmt.Sprintf("share of requests over %v above A's + %.3g: %s", s.SlowThreshold, s.MaxSlowRate, figures)
	case enough && v.ErrorLLR <= v.Lower && v.SlowLLR <= v.Lower:
		v.Decision, v.Reason = Promote, "as good as A: "+figures
	case elapsed >= p.Hold && enough && v.ErrorLLR <= 0 && v.SlowLLR <= 0:
		v.Decision, v.Reason = Promote, fmt.Sprintf("hold %v over, leaning to as good as A: %s", p.Hold, figures)
	case elapsed >= p.Hold:
		v.Decision, v.Reason = Abort, fmt.Sprintf("hold %v over without showing B as good as A (%d of %d samples): %s", p.Hold, b.Requests, s.MinSamples, figures)
	default:
		v.Reason = figures
	}
	return v
}

// rate estimates a rate with a floor.
func rate(k, n int64, floor float64) float64 {
	if n == 0 {
		return floor
	}
	return math.Max(float64(k)/float64(n), floor)
}

// llr is the log-likelihood ratio of k events in n trials under H1 (rate
// p0+margin) against H0 (rate p0).
func llr(p0, margin float64, k, n int64) float64 {
	p0 = math.Min(p0, 0.99)
	p1 := math.Min(p0+margin, 0.999)
	return float64(k)*math.Log(p1/p0) + float64(n-k)*math.Log((1-p1)/(1-p0))
}
