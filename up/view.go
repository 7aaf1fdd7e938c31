package up

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// gatewayView is what the terminal view shows of one gateway, read from
// its admin listener's /metrics.
type gatewayView struct {
	up        bool
	breakers  map[string]float64 // cluster -> 0 closed, 1 open, 2 half-open
	usable    map[string][2]int  // cluster -> usable, all backends
	ejections float64
	rejected  map[string]float64 // guard -> count
	retries   float64
	giveups   map[string]float64 // reason -> retries not made
	// the async queue (veer_async_*): invocations waiting or running,
	// the oldest one's age, dead letters (finished failed)
	asyncOn     bool
	asyncDepth  float64
	asyncOldest float64
	asyncDead   float64
	// asyncAccepted: submissions answered 202 since the gateway started
	asyncAccepted float64
}

func readGateway(ctx context.Context, admin string) gatewayView {
	v := gatewayView{breakers: map[string]float64{}, usable: map[string][2]int{}, rejected: map[string]float64{}, giveups: map[string]float64{}}
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return v
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return v
	}
	v.up = true
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	val := func(m *dto.Metric) float64 {
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	for _, m := range fams["veer_gateway_breaker_state"].GetMetric() {
		v.breakers[label(m, "cluster")] = val(m)
	}
	for _, m := range fams["veer_gateway_backend_usable_state"].GetMetric() {
		c := label(m, "cluster")
		u := v.usable[c]
		u[1]++
		if val(m) == 1 {
			u[0]++
		}
		v.usable[c] = u
	}
	for _, m := range fams["veer_gateway_ejections_total"].GetMetric() {
		v.ejections += val(m)
	}
	for _, m := range fams["veer_gateway_retries_total"].GetMetric() {
		v.retries += val(m)
	}
	for _, m := range fams["veer_retry_giveups_total"].GetMetric() {
		v.giveups[label(m, "reason")] += val(m)
	}
	for _, m := range fams["veer_async_depth_invocations"].GetMetric() {
		v.asyncOn = true
		v.asyncDepth += val(m)
	}
	for _, m := range fams["veer_async_submissions_total"].GetMetric() {
		if label(m, "result") == "accepted" {
			v.asyncAccepted += val(m)
		}
	}
	for _, m := range fams["veer_async_oldest_age_seconds"].GetMetric() {
		v.asyncOldest = max(v.asyncOldest, val(m))
	}
	for _, m := range fams["veer_async_finished_total"].GetMetric() {
		if label(m, "state") == "failed" {
			v.asyncDead += val(m)
		}
	}
	for _, m := range fams["veer_gateway_guard_rejected_total"].GetMetric() {
		v.rejected[label(m, "guard")] += val(m)
	}
	return v
}

var breakerNames = map[float64]string{0: "closed", 1: "OPEN", 2: "half-open"}

// Render is one frame of the terminal view: the traffic since prev per
// domain and cluster, the population's failover states, shed and failed by
// tier, and each gateway's breakers, usable backends and ejections.
func (s *System) Render(ctx context.Context, cur, prev Snapshot) string {
	var b strings.Builder
	dt := cur.Time.Sub(prev.Time).Seconds()
	if dt <= 0 {
		dt = 1
	}
	d := cur.All.Sub(prev.All)
	fmt.Fprintf(&b, "veer up  %s  devices %d  %.0f req/s  success %.2f%%  shed %.0f/s  (all-time %d ok, %d shed, %d failed)\n",
		cur.Time.Format("15:04:05"), cur.Devices, float64(d.Total())/dt, 100*d.Success(), float64(d.Shed)/dt, cur.All.OK, cur.All.Shed, cur.All.Fail)
	b.WriteString("  domain          ok/s   shed/s  fail/s\n")
	for _, k := range sortedKeys(cur.Domains) {
		c := cur.Domains[k].Sub(prev.Domains[k])
		fmt.Fprintf(&b, "  %-14s %6.1f %7.1f %7.1f\n", k, float64(c.OK)/dt, float64(c.Shed)/dt, float64(c.Fail)/dt)
	}
	b.WriteString("  cluster ok/s: ")
	for _, k := range sortedKeys(cur.Clusters) {
		fmt.Fprintf(&b, " %s %.1f", k, float64(cur.Clusters[k]-prev.Clusters[k])/dt)
	}
	b.WriteString("\n  failover:     ")
	for _, k := range sortedKeys(cur.States) {
		fmt.Fprintf(&b, " %s=%d", k, cur.States[k])
	}
	b.WriteString("\n  by tier:      ")
	for _, k := range sortedKeys(cur.Tiers) {
		c := cur.Tiers[k].Sub(prev.Tiers[k])
		fmt.Fprintf(&b, " %s ok %d shed %d fail %d;", k, c.OK, c.Shed, c.Fail)
	}
	b.WriteString("\n")
	if len(cur.Reasons) > 0 {
		b.WriteString("  not ok:       ")
		for _, k := range sortedKeys(cur.Reasons) {
			if n := cur.Reasons[k] - prev.Reasons[k]; n > 0 {
				fmt.Fprintf(&b, " %s: %d;", k, n)
			}
		}
		b.WriteString("\n")
	}
	st := s.State()
	for _, name := range sortedKeys(st.Gateways) {
		g := st.Gateways[name]
		v := readGateway(ctx, g.Admin)
		if !v.up {
			fmt.Fprintf(&b, "  gateway %s pid %d: admin %s not answering\n", name, g.Pid, g.Admin)
			continue
		}
		fmt.Fprintf(&b, "  gateway %s pid %d:", name, g.Pid)
		for _, c := range sortedKeys(v.usable) {
			u := v.usable[c]
			fmt.Fprintf(&b, " %s %d/%d usable, breaker %s;", c, u[0], u[1], breakerNames[v.breakers[c]])
		}
		fmt.Fprintf(&b, " retries %.0f, ejections %.0f", v.retries, v.ejections)
		for _, k := range sortedKeys(v.giveups) {
			if v.giveups[k] > 0 {
				fmt.Fprintf(&b, ", no retry (%s) %.0f", k, v.giveups[k])
			}
		}
		for _, k := range sortedKeys(v.rejected) {
			fmt.Fprintf(&b, ", %s-rejected %.0f", k, v.rejected[k])
		}
		if v.asyncOn {
			fmt.Fprintf(&b, "; async queue %.0f, oldest %.1fs, dead letters %.0f", v.asyncDepth, v.asyncOldest, v.asyncDead)
		}
		b.WriteString("\n")
	}
	if as := s.Async(); len(as) > 0 {
		b.WriteString("  async:        ")
		for _, site := range sortedKeys(as) {
			a := as[site]
			fmt.Fprintf(&b, " %s submitted %d, 202 %d, succeeded %d, failed %d, resends %d;", site, a.Submitted, a.Accepted, a.Succeeded, a.Failed, a.Resends)
		}
		b.WriteString("\n")
	}
	for _, name := range sortedKeys(st.Backends) {
		if st.Backends[name].Pid == 0 {
			fmt.Fprintf(&b, "  backend cluster %s: DOWN (restarting)\n", name)
		}
	}
	return b.String()
}

// Watch prints the view until ctx ends: a redrawn screen each second on a
// terminal, a plain frame every `every` otherwise.
func (s *System) Watch(ctx context.Context, w io.Writer, tty bool, every time.Duration) {
	if tty {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	prev := s.Stats()
	_, pcpu := s.systemUsage()
	pt := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur := s.Stats()
		u, cpu := s.systemUsage()
		now := time.Now()
		frame := s.Render(ctx, cur, prev) + fmt.Sprintf("  system:        CPU %.0f%% of one core, memory %.0f MiB PSS (%.0f MiB RSS summed) (veer up and its %d children)\n",
			100*float64(cpuSince(pcpu, cpu))/float64(now.Sub(pt)), float64(u.pss)/(1<<20), float64(u.rss)/(1<<20), len(s.children))
		prev, pcpu, pt = cur, cpu, now
		if tty {
			fmt.Fprint(w, "\x1b[H\x1b[2J"+frame)
		} else {
			fmt.Fprint(w, frame)
		}
	}
}
