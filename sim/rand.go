package sim

import "math"

// Random numbers in the simulator are counter-based: a value is a pure
// function of (key, counter), where key names a session and a stream. That is
// what makes the streams paired: the loss draw of a session's 57th request is
// the same number whichever strategy is being simulated, however many
// canaries that strategy sent before it, and whichever worker goroutine runs
// the session. The mixing function is SplitMix64's finaliser (Steele, Lea and
// Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014),
// which passes BigCrush when fed a counter.

// mix64 is the SplitMix64 finaliser.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

const golden = 0x9e3779b97f4a7c15

// streamKey derives the key of one named stream of one session.
func streamKey(seed uint64, session int, stream uint64) uint64 {
	return mix64(mix64(seed^golden*uint64(session+1)) + stream*golden)
}

// Stream identifiers. Each models' draws come from their own stream so that
// adding draws to one model does not shift another's realisation.
const (
	streamAttrs     uint64 = iota + 1 // session attributes
	streamArrivals                    // request arrivals and phases
	streamGE                          // Gilbert-Elliott state sojourns
	streamTunnels                     // tunnel/elevator outages
	streamTrace                       // trace offset
	streamRelaunch                    // app relaunches
	streamNetChange                   // network changes
	streamRequest                     // per-request draws (indexed by request)
	streamCanary                      // per-canary draws (indexed by canary)
)

// rng is a sequential generator over one stream: the k-th call returns the
// value at counter k.
type rng struct {
	key uint64
	n   uint64
}

func newRNG(key uint64) rng { return rng{key: key} }

// at returns the uniform 64-bit value at counter n of stream key.
func at(key, n uint64) uint64 { return mix64(key + (n+1)*golden) }

// unitAt returns a uniform float64 in [0, 1) at counter n of stream key.
func unitAt(key, n uint64) float64 { return float64(at(key, n)>>11) * 0x1p-53 }

func (r *rng) uint64() uint64 {
	v := at(r.key, r.n)
	r.n++
	return v
}

// float returns a uniform float64 in [0, 1).
func (r *rng) float() float64 { return float64(r.uint64()>>11) * 0x1p-53 }

// exp returns an exponential variate with the given mean.
func (r *rng) exp(mean float64) float64 { return expOf(r.float(), mean) }

func expOf(u, mean float64) float64 { return -mean * math.Log1p(-u) }

func normalOf(u1, u2 float64) float64 {
	// 1-u1 is in (0, 1], so the logarithm is finite.
	return math.Sqrt(-2*math.Log(1-u1)) * math.Cos(2*math.Pi*u2)
}

// lognormalOf returns a log-normal variate with the given median and sigma
// (of the underlying normal) from two uniforms.
func lognormalOf(u1, u2, median, sigma float64) float64 {
	if sigma == 0 {
		return median
	}
	return median * math.Exp(sigma*normalOf(u1, u2))
}

// pick returns the index chosen by u in [0,1) among weights (which sum to
// total > 0).
func pick(u float64, weights []float64, total float64) int {
	x := u * total
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}
