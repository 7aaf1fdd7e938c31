package up

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// limitTolerance is how far the admitted rate over both gateways may be
// from /api/search's limit and still count as "the limit holds": the
// fallback without the division by N admits 2x the limit (+100 %).
const limitTolerance = 0.25

// limitOverload is the offered load on /api/search, as a multiple of its
// limit (half to each gateway): each gateway alone is offered the whole
// limit, so a fallback that does not divide admits twice the limit.
const limitOverload = 2.0

// EngineScenarios are the scenarios that need an external engine (issue
// 28): present when veer up runs with --redis or --store etcd, SKIPPED
// when that engine is one veer up did not start (chaos cannot kill it).
func EngineScenarios() []Scenario {
	return []Scenario{
		{Name: "redis-kill", Seed: "003", Fault: "SIGKILL of the redis-server child (veer up --redis local) under 2x /api/search's limit on both gateways",
			Promise: fmt.Sprintf("admitted/s over both gateways within %.0f%% of the limit before, after the kill (each gateway falls back to limit / 2) and after Redis returns (shared again)", 100*limitTolerance),
			run:     runRedisKill, skip: skipRedis},
		{Name: "etcd-kill", Seed: "004", Fault: "SIGKILL of the etcd child (veer up --store etcd://local) mid-load",
			Promise: "routing keeps answering from the last snapshot (new sessions bootstrap; existing traffic >= 99%), admin writes get 503 with Retry-After; after etcd returns a write is applied and answers follow it",
			run:     runEtcdKill, skip: skipEtcd},
	}
}

// Present is Scenarios plus the engine scenarios whose engine the system
// st runs with ("run all"): a system without --redis has no redis-kill.
func Present(st State) []Scenario {
	out := Scenarios()
	for _, sc := range EngineScenarios() {
		if (sc.Name == "redis-kill" && st.Engines.Redis == "") || (sc.Name == "etcd-kill" && st.Engines.Store == "") {
			continue
		}
		out = append(out, sc)
	}
	return out
}

func skipRedis(st State) string {
	switch e := st.Engines; {
	case e.Redis == "":
		return "veer up runs without --redis: no shared limits to break"
	case !e.RedisLocal:
		return fmt.Sprintf("veer up uses an external Redis (%s): chaos cannot kill what veer up did not start (use --redis local)", e.Redis)
	}
	return ""
}

func skipEtcd(st State) string {
	switch e := st.Engines; {
	case e.Store == "":
		return "veer up runs on its embedded store: no etcd to kill (use --store etcd://local)"
	case !e.StoreLocal:
		return fmt.Sprintf("veer up uses an external etcd (%s): chaos cannot kill what veer up did not start (use --store etcd://local)", e.Store)
	}
	return ""
}

// limited runs veer up's /api/search load generator for d.
func (c *Chaos) limited(ctx context.Context, rate float64, d time.Duration) (LimitedResult, error) {
	var res LimitedResult
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s/v1/fault/limited?rate=%g&duration=%s", c.api, rate, d), nil)
	if err != nil {
		return res, err
	}
	cl := *c.client
	cl.Timeout = d + 30*time.Second
	resp, err := cl.Do(req)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return res, fmt.Errorf("POST /v1/fault/limited: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return res, json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&res)
}

// metricSum sums a metric family from a gateway's /metrics; ok is false
// when the gateway does not answer.
func metricSum(ctx context.Context, admin, name string) (float64, bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, false
	}
	var sum float64
	for _, m := range fams[name].GetMetric() {
		sum += metricValue(m)
	}
	return sum, true
}

func metricValue(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

// gatewaysSum is metricSum for each gateway, by site.
func gatewaysSum(ctx context.Context, st State, name string) map[string]float64 {
	out := map[string]float64{}
	for site, g := range st.Gateways {
		if v, ok := metricSum(ctx, g.Admin, name); ok {
			out[site] = v
		} else {
			out[site] = math.NaN()
		}
	}
	return out
}

// withinLimit says whether admitted/s is within limitTolerance of limit.
func withinLimit(admitted, limit float64) bool {
	return math.Abs(admitted/limit-1) <= limitTolerance
}

func runRedisKill(ctx context.Context, c *Chaos, r *Result) error {
	st, err := c.state(ctx)
	if err != nil {
		return err
	}
	e := st.Engines
	limit, pid := e.SearchLimit, e.RedisPid
	rate := limitOverload * limit
	r.Mechanism = fmt.Sprintf("open-loop load of %.0f/s on %s (half to each gateway; limit %.0f/s over both, burst %d, keyed per route), %v windows; SIGKILL of redis-server (pid %d, %s); veer up restarts it after restart_after",
		rate, PathSearch, limit, e.SearchBurst, c.cfg.Window, pid, e.Redis)
	measure := func(when string) (LimitedResult, error) {
		res, err := c.limited(ctx, rate, c.cfg.Window)
		if err != nil {
			return res, err
		}
		t := res.Total()
		r.measure("%s: %.1f admitted/s (%.0f%% of the limit; a %d, b %d admitted), %.1f limited/s, %d failed",
			when, res.Admitted, 100*res.Admitted/limit, res.Sites["a"].OK, res.Sites["b"].OK, res.Limited, t.Fail)
		if t.Fail > 0 {
			var why []string
			for _, k := range sortedKeys(res.Failed) {
				why = append(why, fmt.Sprintf("%d %s", res.Failed[k], k))
			}
			r.measure("failed: %s", strings.Join(why, ", "))
		}
		return res, nil
	}
	before, err := measure("Redis up")
	if err != nil {
		return err
	}
	fb1 := gatewaysSum(ctx, st, "veer_limitredis_fallbacks_total")
	fmt.Fprintf(c.out, "chaos: redis-kill: SIGKILL pid %d\n", pid)
	if err := signal(pid, syscall.SIGKILL); err != nil {
		return err
	}
	after, err := measure("Redis killed")
	if err != nil {
		return err
	}
	fb2 := gatewaysSum(ctx, st, "veer_limitredis_fallbacks_total")
	fellBack := 0
	for site := range st.Gateways {
		if fb2[site] > fb1[site] {
			fellBack++
		}
	}
	r.measure("%d of %d gateways fell back to local limits (veer_limitredis_fallbacks_total)", fellBack, len(st.Gateways))
	if err := c.until(ctx, c.cfg.Recover, func(st State, _ Snapshot) bool {
		p := st.Engines.RedisPid
		return p != 0 && p != pid
	}); err != nil {
		return fmt.Errorf("redis-server not restarted: %w", err)
	}
	restarted := time.Now()
	// shared again: every gateway's probe found Redis (fallback state 0)
	shared := c.until(ctx, c.cfg.Recover, func(st State, _ Snapshot) bool {
		for _, v := range gatewaysSum(ctx, st, "veer_limitredis_fallback_state") {
			if v != 0 {
				return false
			}
		}
		return true
	}) == nil
	if shared {
		r.measure("every gateway back on Redis %.1fs after the restart", time.Since(restarted).Seconds())
	} else {
		r.measure("gateways still on local limits %v after the restart", c.cfg.Recover)
	}
	resumed, err := measure("Redis back")
	if err != nil {
		return err
	}
	r.Success = after.Admitted / limit
	r.Pass = withinLimit(before.Admitted, limit) && withinLimit(after.Admitted, limit) && withinLimit(resumed.Admitted, limit) &&
		before.Limited > 0 && after.Limited > 0 && fellBack == len(st.Gateways) && shared &&
		fewFailed(before) && fewFailed(after) && fewFailed(resumed)
	return nil
}

// fewFailed: at most 1 % of a load's requests failed (neither admitted nor
// limited): the limits' fallback must not turn into errors.
func fewFailed(res LimitedResult) bool {
	t := res.Total()
	return t.Total() > 0 && float64(t.Fail) <= 0.01*float64(t.Total())
}

// State reads the running system's state (GET /v1/state).
func (c *Chaos) State(ctx context.Context) (State, error) { return c.state(ctx) }
