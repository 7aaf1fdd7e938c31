package up

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// overloadFactor is seed 001's overload: 6x what the endpoint can serve.
const overloadFactor = 6

// overloadP99 is the promise for the critical requests' p99.
const overloadP99 = 100 * time.Millisecond

func (c *Chaos) overload(ctx context.Context, rate float64, d time.Duration) (OverloadResult, error) {
	var res OverloadResult
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s/v1/fault/overload?site=a&rate=%.0f&duration=%s", c.api, rate, d), nil)
	if err != nil {
		return res, err
	}
	cl := *c.client
	cl.Timeout = d + time.Minute // the call answers when the flood ended
	resp, err := cl.Do(req)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return res, fmt.Errorf("POST /v1/fault/overload: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return res, json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&res)
}

// runOverload is seed 001: 6x /api/feed's capacity on site a's gateway
// from a load generator inside veer up (a tenth of it critical), beside a
// critical /api/trips stream and the population's own traffic.
func runOverload(ctx context.Context, c *Chaos, r *Result) error {
	before, err := c.stats(ctx)
	if err != nil {
		return err
	}
	capacity := before.FeedCapacity
	if capacity <= 0 {
		return fmt.Errorf("veer up reports no feed capacity")
	}
	rate := overloadFactor * capacity
	r.Mechanism = fmt.Sprintf("open-loop load generator in veer up: %.0f requests/s (%dx the %.0f/s site a's cluster a1 answers on %s) to site a's gateway over HTTP/2 for %v, %.0f %% critical, the rest sheddable; beside it a critical %s stream at %d/s",
		rate, overloadFactor, capacity, PathFeed, c.cfg.Window, 100*overloadCriticalShare, PathTrips, overloadNeighbourRate)
	fmt.Fprintf(c.out, "chaos: overload: %.0f requests/s on %s for %v\n", rate, PathFeed, c.cfg.Window)
	res, err := c.overload(ctx, rate, c.cfg.Window)
	if err != nil {
		return err
	}
	after, err := c.stats(ctx)
	if err != nil {
		return err
	}
	var crit, shed, trips StreamResult
	for _, s := range res.Streams {
		switch {
		case s.Path == PathFeed && s.Tier == "critical":
			crit = s
		case s.Path == PathFeed:
			shed = s
		default:
			trips = s
		}
	}
	served := func(s StreamResult) float64 {
		if s.Counts.Total() == 0 {
			return 0
		}
		return float64(s.Counts.OK) / float64(s.Counts.Total())
	}
	r.Success = served(crit)
	r.measure("critical %s: %.2f%% served (%d of %d, %d shed, %d missed), p50 %v, p99 %v", PathFeed, 100*r.Success, crit.Counts.OK, crit.Counts.Total(), crit.Counts.Shed, crit.Missed, crit.P50.Round(time.Millisecond), crit.P99.Round(time.Millisecond))
	r.measure("sheddable %s: %d served, %d shed, %d failed (p99 of the served %v)", PathFeed, shed.Counts.OK, shed.Counts.Shed, shed.Counts.Fail, shed.P99.Round(time.Millisecond))
	r.measure("neighbour %s (critical): %.2f%% served (%d of %d), p99 %v", PathTrips, 100*served(trips), trips.Counts.OK, trips.Counts.Total(), trips.P99.Round(time.Millisecond))
	pc := after.Tiers["critical"].Sub(before.Tiers["critical"])
	r.measure("population's critical requests in that time: %.2f%% success (%d of %d)", 100*pc.Success(), pc.OK, pc.OK+pc.Fail)
	if why := reasonsDelta(before, after); why != "" {
		r.measure("population not ok: %s", why)
	}
	shares := crit.Counts.Total() > 0 && crit.Counts.OK == crit.Counts.Total() &&
		trips.Counts.Total() > 0 && trips.Counts.OK == trips.Counts.Total() && pc.Success() >= 0.999
	fast := crit.P99 <= overloadP99 && trips.P99 <= overloadP99
	r.Pass = shares && fast
	r.LatencyOnly = shares && !fast
	return nil
}
