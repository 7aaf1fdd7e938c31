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
	// Latency is the requests' latency histogram: Latency[i] counts those
	// in bucket i (LatencyBucket), LatencyBuckets long; empty when nothing
	// was counted (or a gateway that keeps none published it).
	Latency []int64 `json:"latency,omitempty"`
}

// LatencyBuckets is the length of Counts.Latency: buckets bounded above by
// LatencyBounds and a last one for the rest.
const LatencyBuckets = 51

// LatencyBounds are the upper bounds of the latency buckets, 1 ms × 1.25^i
// (1 ms to 56 s: 25 % wide, so that a bucket is well below the factor
// the tail test looks for).
var LatencyBounds = func() []time.Duration {
	b := make([]time.Duration, LatencyBuckets-1)
	f := float64(time.Millisecond)
	for i := range b {
		b[i] = time.Duration(f).Round(time.Microsecond)
		f *= 1.25
	}
	return b
}()

// LatencyBucket is the bucket of Counts.Latency that latency d falls in:
// the first whose bound is at least d (a logarithm, then a step to correct
// its rounding).
func LatencyBucket(d time.Duration) int {
	if d <= LatencyBounds[0] {
		return 0
	}
	i := min(int(math.Log(float64(d)/float64(LatencyBounds[0]))/logGrowth), len(LatencyBounds))
	for i > 0 && d <= LatencyBounds[i-1] {
		i--
	}
	for i < len(LatencyBounds) && d > LatencyBounds[i] {
		i++
	}
	return i
}

var logGrowth = math.Log(1.25)

// Observe counts one request: failed, and its latency against the
// threshold over which it is slow.
func (c *Counts) Observe(failed bool, d, slow time.Duration) {
	c.Requests++
	if failed {
		c.Errors++
	}
	if d > slow {
		c.Slow++
	}
	if len(c.Latency) == 0 {
		c.Latency = make([]int64, LatencyBuckets)
	}
	c.Latency[LatencyBucket(d)]++
}

// Add returns c + d.
func (c Counts) Add(d Counts) Counts {
	s := Counts{Requests: c.Requests + d.Requests, Errors: c.Errors + d.Errors, Slow: c.Slow + d.Slow}
	if len(c.Latency) > 0 || len(d.Latency) > 0 {
		s.Latency = make([]int64, max(len(c.Latency), len(d.Latency)))
		for i := range s.Latency {
			if i < len(c.Latency) {
				s.Latency[i] += c.Latency[i]
			}
			if i < len(d.Latency) {
				s.Latency[i] += d.Latency[i]
			}
		}
	}
	return s
}

// over returns how many of c's latencies fall above bucket k, and how many
// latencies c has.
func (c Counts) over(k int) (over, n int64) {
	for i, v := range c.Latency {
		n += v
		if i > k {
			over += v
		}
	}
	return over, n
}

// The tail test: B's share of requests over TailFactor × A's observed
// TailQuantile latency, against A's share over the same bound.
const (
	// TailQuantile is the quantile of A's latency the tail test starts
	// from (its p99).
	TailQuantile = 0.99
	// tailBuckets is how many buckets above A's p99 bucket the bound
	// lies: 1.25^3 ≈ 1.95, about TailFactor.
	tailBuckets = 3
	// TailFactor: the bound is about this many times A's p99, so that a
	// B a little slower than A everywhere is not a B whose tail is bad.
	TailFactor = 2
	// MinTailSamplesA is the number of A's latencies the tail test needs
	// to place A's p99 (until then it does not vote).
	MinTailSamplesA = 1000
)

// tailBound is the bucket above which the tail test counts (about
// TailFactor × A's p99); ok false while A has fewer than MinTailSamplesA
// latencies, or its p99 is beyond the histogram.
func tailBound(a Counts) (k int, ok bool) {
	_, n := a.over(len(a.Latency))
	if n < MinTailSamplesA {
		return 0, false
	}
	var cum int64
	for i, v := range a.Latency {
		cum += v
		if float64(cum) >= TailQuantile*float64(n) {
			k = i + tailBuckets
			return k, k < len(LatencyBounds)
		}
	}
	return 0, false // a histogram that does not add up (negative counts)
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
	// TailLLR is the tail test's ratio (0 while it does not vote) and
	// TailOver its bound: about TailFactor × A's observed p99.
	TailLLR  float64       `json:"tail_llr"`
	TailOver time.Duration `json:"tail_over,omitempty"`
	Upper    float64       `json:"upper"`
	Lower    float64       `json:"lower"`
}

// rate floors: a version with no error yet is not taken to have a zero
// rate (the test's ratio would be infinite).
const (
	minErrorRate = 1e-4
	minSlowRate  = 1e-3
)

// Judge decides a step from the pooled counts of both versions and the time
// the step has run, with a sequential probability ratio test (Wald) on B's
// error rate, separately on its share of slow requests (over the SLO's
// SlowThreshold) and on its share of requests over TailFactor × A's
// observed p99 (the tail test, from the latency histograms, once A has
// MinTailSamplesA of them: a B whose answers are mostly fine but whose
// tail is several times A's, below a SlowThreshold set for the route):
// H0 "B's rate is A's", H1 "B's rate is A's plus the SLO's margin". Either test crossing
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
	tailOK := true // the tail test passes while it does not vote
	var tail string
	if k, ok := tailBound(a); ok {
		ao, an := a.over(k)
		bo, bn := b.over(k)
		v.TailOver = LatencyBounds[k]
		v.TailLLR = llr(rate(ao, an, minSlowRate), s.MaxTailRate, bo, bn)
		tailOK = v.TailLLR <= v.Lower
		tail = fmt.Sprintf("over %v (%dx A's p99): B %d of %d, A %d of %d", v.TailOver, TailFactor, bo, bn, ao, an)
		figures += "; " + tail
	}
	enough := b.Requests >= int64(s.MinSamples)
	switch {
	case v.ErrorLLR >= v.Upper:
		v.Decision, v.Reason = Abort, fmt.Sprintf("error rate above A's + %.3g: %s", s.MaxErrorRate, figures)
	case v.SlowLLR >= v.Upper:
		v.Decision, v.Reason = Abort, fmt.Sprintf("share of requests over %v above A's + %.3g: %s", s.SlowThreshold, s.MaxSlowRate, figures)
	case v.TailLLR >= v.Upper:
		v.Decision, v.Reason = Abort, fmt.Sprintf("share of requests over %dx A's p99 (%v) above A's + %.3g: %s", TailFactor, v.TailOver, s.MaxTailRate, figures)
	case enough && v.ErrorLLR <= v.Lower && v.SlowLLR <= v.Lower && tailOK:
		v.Decision, v.Reason = Promote, "as good as A: "+figures
	case elapsed >= p.Hold && enough && v.ErrorLLR <= 0 && v.SlowLLR <= 0 && v.TailLLR <= 0:
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
