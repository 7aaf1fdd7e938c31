package gateway

import (
	"math/rand/v2"
	"net/http"
	"sort"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/breaker"
)

// cluster is a cluster of one config snapshot. Its backends and its
// clusterState are shared with the snapshots before and after it.
type cluster struct {
	cfg       Cluster
	backends  []*backend
	cum       []int // cumulative weights, for weighted random picks
	transport http.RoundTripper
	breaker   *breaker.Breaker // nil when breakers are off
	state     *clusterState
	m         *clusterMetrics
}

// clusterState is a cluster's availability across snapshots.
type clusterState struct {
	drained atomic.Bool
	// upSince is when the cluster last became available (unix nanos); 0
	// while it is not. Traffic returns linearly over ReturnRamp from then.
	upSince atomic.Int64
}

// usableShare returns the share of backends usable at now.
func (c *cluster) usableShare(now int64) float64 {
	n := 0
	for _, b := range c.backends {
		if b.usable(now, false) {
			n++
		}
	}
	return float64(n) / float64(len(c.backends))
}

// share returns the share of the route's traffic this cluster should take
// at now: 0 while it is drained or below MinHealthyShare, then rising
// linearly to 1 over ReturnRamp.
func (c *cluster) share(now int64, stallAfter time.Duration) float64 {
	if c.state.drained.Load() {
		return 0
	}
	if c.stalled(now, stallAfter) {
		if c.m != nil {
			c.m.stalled.Inc()
		}
		return 0 // upSince kept: a stall is not an outage to ramp back from
	}
	if c.usableShare(now) < c.cfg.MinHealthyShare || c.usableShare(now) == 0 {
		c.state.upSince.Store(0)
		return 0
	}
	up := c.state.upSince.Load()
	if up == 0 {
		c.state.upSince.CompareAndSwap(0, now)
		up = c.state.upSince.Load()
	}
	if c.cfg.ReturnRamp <= 0 {
		return 1
	}
	age := time.Duration(now - up)
	if age >= c.cfg.ReturnRamp {
		return 1
	}
	return 0.05 + 0.95*float64(age)/float64(c.cfg.ReturnRamp)
}

// stalled reports whether every usable backend of c is stalled: requests
// outstanding, none answered for stallAfter (a frozen cluster).
func (c *cluster) stalled(now int64, stallAfter time.Duration) bool {
	if stallAfter <= 0 {
		return false
	}
	hold := stallHold
	if c.cfg.Health.Path != "" {
		hold = stallHoldChecked
	}
	n := 0
	for _, b := range c.backends {
		if !b.usable(now, false) {
			continue
		}
		if !b.stalled(now, stallAfter, hold) {
			return false
		}
		n++
	}
	return n > 0
}

// pick chooses a backend by the power of two choices over least
// outstanding requests, scaled by weight and slow start. Ejected and
// unhealthy backends are skipped unless none is usable (panic mode: then
// every backend that is not drained is used); avoid (the backend a retry
// just failed on, or nil) is taken only when it is the one left. It returns
// nil when every backend is drained.
func (c *cluster) pick(now int64, rnd *rand.Rand, avoid *backend) (b *backend, panicked bool) {
	if avoid != nil && len(c.backends) > 1 {
		if a := c.draw(now, false, rnd, avoid); a != nil {
			if o := c.draw(now, false, rnd, avoid); o != nil && o != a && c.score(o, now) < c.score(a, now) {
				return o, false
			}
			return a, false
		}
	}
	a := c.draw(now, false, rnd, nil)
	if a == nil {
		a = c.draw(now, true, rnd, nil)
		if a == nil {
			return nil, false
		}
		panicked = true
	}
	o := c.draw(now, panicked, rnd, a)
	if o == nil {
		return a, panicked
	}
	if c.score(o, now) < c.score(a, now) {
		return o, panicked
	}
	return a, panicked
}

func (c *cluster) score(b *backend, now int64) float64 {
	w := float64(c.weight(b)) * b.slowStartFactor(now, c.cfg.SlowStart)
	return float64(b.outstanding.Load()+1) / w
}

func (c *cluster) weight(b *backend) int {
	for i, x := range c.backends {
		if x == b {
			if i == 0 {
				return c.cum[0]
			}
			return c.cum[i] - c.cum[i-1]
		}
	}
	return 1
}

// draw picks a usable backend other than not, weighted at random: a few
// random draws, then a scan from a random start.
func (c *cluster) draw(now int64, ignoreHealth bool, rnd *rand.Rand, not *backend) *backend {
	total := c.cum[len(c.cum)-1]
	for range 3 {
		i := sort.SearchInts(c.cum, rnd.IntN(total)+1)
		if b := c.backends[i]; b != not && b.usable(now, ignoreHealth) {
			return b
		}
	}
	start := rnd.IntN(len(c.backends))
	for k := range c.backends {
		b := c.backends[(start+k)%len(c.backends)]
		if b != not && b.usable(now, ignoreHealth) {
			return b
		}
	}
	return nil
}

// mayEject reports whether one more backend may be ejected without
// exceeding MaxEjectedShare.
func (c *cluster) mayEject(now int64) bool {
	n := 0
	for _, b := range c.backends {
		if b.ejectedUntil.Load() > now {
			n++
		}
	}
	return float64(n+1) <= c.cfg.Outlier.MaxEjectedShare*float64(len(c.backends))
}
