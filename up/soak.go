package up

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The soak (issue 28): veer up for a long time with a chaos scenario every
// few minutes, round-robin; RSS, PSS and goroutines sampled (summed over
// veer up's processes), the population's errors counted inside the
// scenarios' windows apart from those outside them, and a report: growth
// after warm-up (the minimum of each growth window, first against last),
// every verdict, the errors outside the windows.
//
// The warm-up is, by default, one round of the scenarios: a process's
// memory steps up the first time each fault moves its traffic or its
// config (connection pools, buffers, the heap's high-water mark), and a
// leak is growth that goes on after every path has run once. Its
// verdicts and errors count like the rest; only the growth starts after it.

// Defaults of SoakConfig.
const (
	DefaultSoakDuration = 30 * time.Minute
	DefaultSoakEvery    = 2 * time.Minute
	DefaultSoakSample   = 30 * time.Second
	DefaultSoakWindow   = 5 * time.Minute
	// SoakMaxGrowth is the target: RSS and goroutines flat within
	// 10 % after warm-up.
	SoakMaxGrowth = 0.10
	// soakStatsEvery is how often the soak reads the population's
	// counters to attribute errors to inside or outside a window.
	soakStatsEvery = time.Second
)

// SoakConfig times a soak; the zero value is the 30 minutes with a
// scenario every 2 minutes.
type SoakConfig struct {
	// Duration of the soak after its warm-up; default
	// DefaultSoakDuration.
	Duration time.Duration `yaml:"duration" json:"duration"`
	// Every: a scenario starts this often (or when the one before ends,
	// if later); default DefaultSoakEvery.
	Every time.Duration `yaml:"every" json:"every"`
	// Sample: RSS, PSS and goroutines are read this often; default
	// DefaultSoakSample.
	Sample time.Duration `yaml:"sample" json:"sample"`
	// WarmUp: samples before this are not part of the growth.
	WarmUp time.Duration `yaml:"warm_up" json:"warm_up"`
	// WarmUpRounds: nor are the samples before this many rounds of the
	// scenarios have ended (each played once, back to back, the last
	// one's window closed). The warm-up ends at the later of the two;
	// with both zero, one round.
	WarmUpRounds int `yaml:"warm_up_rounds" json:"warm_up_rounds"`
	// GrowthWindow: growth compares the minimum of the first such window
	// after warm-up with the minimum of the last; default
	// DefaultSoakWindow.
	GrowthWindow time.Duration `yaml:"growth_window" json:"growth_window"`
	// Scenarios to play round-robin, by name; default every scenario the
	// system has (Present).
	Scenarios []string `yaml:"scenarios" json:"scenarios"`
}

func (c SoakConfig) withDefaults() SoakConfig {
	c.Duration = cmp.Or(c.Duration, DefaultSoakDuration)
	c.Every = cmp.Or(c.Every, DefaultSoakEvery)
	c.Sample = cmp.Or(c.Sample, DefaultSoakSample)
	if c.WarmUp == 0 && c.WarmUpRounds == 0 {
		c.WarmUpRounds = 1
	}
	c.GrowthWindow = cmp.Or(c.GrowthWindow, DefaultSoakWindow)
	return c
}

// ProcUsage is one process of a running veer up (GET /v1/usage).
type ProcUsage struct {
	Name string `json:"name"`
	Pid  int    `json:"pid"`
	RSS  int64  `json:"rss_bytes"`
	PSS  int64  `json:"pss_bytes"`
	// Goroutines: veer up's own count, a gateway's go_goroutines; -1 for
	// a process that does not report them (backends, DNS, etcd, Redis).
	Goroutines int `json:"goroutines"`
}

// Usage lists veer up's process and its running children.
func (s *System) Usage(ctx context.Context) []ProcUsage {
	self, _ := procUsage(os.Getpid())
	out := []ProcUsage{{Name: "veer up", Pid: os.Getpid(), RSS: self.rss, PSS: self.pss, Goroutines: runtime.NumGoroutine()}}
	st := s.State()
	admins := map[string]string{}
	for site, g := range st.Gateways {
		admins["gateway-"+site] = g.Admin
	}
	for _, c := range s.children {
		pid := c.Pid()
		if pid <= 0 {
			continue
		}
		u, err := procUsage(pid)
		if err != nil {
			continue
		}
		p := ProcUsage{Name: c.name, Pid: pid, RSS: u.rss, PSS: u.pss, Goroutines: -1}
		if a, ok := admins[c.name]; ok {
			if n, ok := metricSum(ctx, a, "go_goroutines"); ok {
				p.Goroutines = int(n)
			}
		}
		out = append(out, p)
	}
	return out
}

func (s *System) handleUsage(w http.ResponseWriter, r *http.Request) {
	writeJSONResponse(w, s.Usage(r.Context()))
}

// SoakSample is one reading of the system's resources.
type SoakSample struct {
	At time.Time `json:"at"`
	// Goroutines summed over the processes that report them.
	Goroutines int   `json:"goroutines"`
	RSS        int64 `json:"rss_bytes"`
	PSS        int64 `json:"pss_bytes"`
	Procs      int   `json:"procs"`
	// Reporting is how many processes reported goroutines: a gateway
	// stopped (SIGSTOP) or down answers no metrics, and a sample without
	// it is not the system's floor.
	Reporting int `json:"reporting"`
	// Devices in the population then: site-down and etcd-kill launch new
	// sessions during their run and retire them at its end, so the first
	// and last samples should agree.
	Devices int `json:"devices"`
	// Load1 is the machine's one-minute load average then (/proc/loadavg
	// where the soak runs, the same machine as veer up: it is loopback
	// only); 0 where it cannot be read.
	Load1 float64 `json:"load1"`
}

// SoakFail is one second with requests failed outside every window.
type SoakFail struct {
	At   time.Time `json:"at"`
	Fail int64     `json:"fail"`
}

// soakBurstGap splits the failures outside the windows into bursts.
const soakBurstGap = 10 * time.Second

// Growth is one resource's growth after warm-up: the minimum over the
// first growth window against the minimum over the last.
type Growth struct {
	First   float64 `json:"first"`
	Last    float64 `json:"last"`
	Share   float64 `json:"share"` // Last/First - 1
	Windows int     `json:"windows"`
}

// SoakWindow is one scenario's window: from its start to one request
// timeout after its end (requests sent during it may fail after it).
type SoakWindow struct {
	Name string    `json:"name"`
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// SoakReport is what a soak measured.
type SoakReport struct {
	Config SoakConfig `json:"config"`
	Start  time.Time  `json:"start"`
	// Measured is where the warm-up ended: the growth is over the
	// samples from here; zero reads as Start + Config.WarmUp.
	Measured time.Time    `json:"measured,omitzero"`
	End      time.Time    `json:"end"`
	Samples  []SoakSample `json:"samples"`
	// Complete is how many samples had every process (complete): the
	// growth is computed over those.
	Complete int      `json:"complete"`
	Results  []Result `json:"results"`
	// Inside and Outside are the population's requests inside the
	// scenarios' windows and outside them.
	Inside  Counts `json:"inside"`
	Outside Counts `json:"outside"`
	// OutsideReasons counts the shed and failed requests outside the
	// windows by kind (Snapshot.Reasons), OutsideFails when they failed.
	OutsideReasons map[string]int64 `json:"outside_reasons,omitempty"`
	OutsideFails   []SoakFail       `json:"outside_fails,omitempty"`
	// Windows are the scenarios' windows, in order.
	Windows []SoakWindow      `json:"windows,omitempty"`
	Growth  map[string]Growth `json:"growth"` // "rss", "pss", "goroutines"
	// Pass: every scenario PASSed (skipped ones aside), no request failed
	// outside a window, RSS and goroutines grew at most SoakMaxGrowth.
	Pass    bool     `json:"pass"`
	Reasons []string `json:"reasons,omitempty"`
}

// Soak runs the soak against the veer up whose API c talks to.
func (c *Chaos) Soak(ctx context.Context, sc SoakConfig) (SoakReport, error) {
	sc = sc.withDefaults()
	st, err := c.state(ctx)
	if err != nil {
		return SoakReport{}, err
	}
	var scs []Scenario
	if len(sc.Scenarios) == 0 {
		scs = Present(st)
	}
	for _, name := range sc.Scenarios {
		s, ok := Lookup(name)
		if !ok {
			return SoakReport{}, fmt.Errorf("soak: no scenario %q", name)
		}
		scs = append(scs, s)
	}
	if len(scs) == 0 {
		return SoakReport{}, fmt.Errorf("soak: no scenario to play")
	}
	rep := SoakReport{Config: sc, Start: time.Now(), Growth: map[string]Growth{}, OutsideReasons: map[string]int64{}}
	// end is known once the warm-up's rounds have ended (zero until then)
	var end time.Time
	warmRounds := sc.WarmUpRounds * len(scs)
	if warmRounds == 0 {
		rep.Measured = rep.Start.Add(sc.WarmUp)
		end = rep.Measured.Add(sc.Duration)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var mu sync.Mutex
	var windows []SoakWindow
	open := false
	var bg sync.WaitGroup
	defer bg.Wait()
	defer cancel()
	// resources every Sample
	bg.Add(1)
	go func() {
		defer bg.Done()
		t := time.NewTicker(sc.Sample)
		defer t.Stop()
		for {
			if smp, err := c.sample(sctx); err == nil {
				mu.Lock()
				rep.Samples = append(rep.Samples, smp)
				mu.Unlock()
			}
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	// the population's counters every second, each delta inside or
	// outside a window
	first, err := c.stats(ctx)
	if err != nil {
		return SoakReport{}, err
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		prev, prevReasons, prevAt := first.All, first.Reasons, time.Now()
		t := time.NewTicker(soakStatsEvery)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			s, err := c.stats(sctx)
			if err != nil {
				continue // a missed reading: its delta lands in the next
			}
			now := time.Now()
			d := s.All.Sub(prev)
			mu.Lock()
			in := open
			for _, w := range windows {
				if prevAt.Before(w.To) && now.After(w.From) {
					in = true
				}
			}
			if in {
				rep.Inside = rep.Inside.plus(d)
			} else {
				rep.Outside = rep.Outside.plus(d)
				for k, v := range s.Reasons {
					if dv := v - prevReasons[k]; dv > 0 {
						rep.OutsideReasons[k] += dv
					}
				}
				if d.Fail > 0 {
					rep.OutsideFails = append(rep.OutsideFails, SoakFail{At: now, Fail: d.Fail})
				}
			}
			mu.Unlock()
			prev, prevReasons, prevAt = s.All, s.Reasons, now
		}
	}()

	timeout := first.RequestTimeout
	for i := 0; ; i++ {
		// the warm-up's rounds play back to back; after them, one every
		// Every from the end of the warm-up
		due := time.Now()
		switch {
		case warmRounds == 0:
			due = rep.Start.Add(time.Duration(i) * sc.Every)
		case i >= warmRounds:
			due = rep.Measured.Add(time.Duration(i-warmRounds) * sc.Every)
		}
		if !end.IsZero() && !due.Before(end) {
			break
		}
		if err := sleepCtx(sctx, time.Until(due)); err != nil {
			break
		}
		s := scs[i%len(scs)]
		fmt.Fprintf(c.out, "soak: %s: %s\n", time.Now().UTC().Format(time.TimeOnly), s.Name)
		mu.Lock()
		open = true
		w := SoakWindow{Name: s.Name, From: time.Now()}
		mu.Unlock()
		// the scenario runs to its end even past the soak's end (a fault
		// left injected would be worse than a longer soak)
		r := c.Run(ctx, s)
		mu.Lock()
		open = false
		w.To = time.Now().Add(timeout)
		windows = append(windows, w)
		rep.Windows = append(rep.Windows, w)
		rep.Results = append(rep.Results, r)
		if i+1 == warmRounds {
			rep.Measured = later(rep.Start.Add(sc.WarmUp), w.To)
			end = rep.Measured.Add(sc.Duration)
			fmt.Fprintf(c.out, "soak: warm-up ended (%d round(s) of %d scenarios); measuring for %v from %s UTC\n",
				sc.WarmUpRounds, len(scs), sc.Duration, rep.Measured.UTC().Format(time.TimeOnly))
		}
		mu.Unlock()
		fmt.Fprint(c.out, r.String())
		if ctx.Err() != nil {
			return SoakReport{}, ctx.Err()
		}
	}
	// no scenario is due before the end: keep sampling until then
	_ = sleepCtx(sctx, time.Until(end))
	if ctx.Err() != nil {
		return SoakReport{}, ctx.Err()
	}
	cancel()
	bg.Wait()
	rep.End = time.Now()
	rep.judge()
	return rep, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// load1 is /proc/loadavg's first field; 0 where it cannot be read.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return 0
	}
	return v
}

// SoakBurst is a run of seconds with failures outside the windows, no two
// more than soakBurstGap apart, placed against the windows around it.
type SoakBurst struct {
	From, To time.Time
	Fail     int64
	// After names the window that ended last before From and how long
	// before ("" at the soak's start); Before the next one's start.
	After      string
	SinceAfter time.Duration
	Before     string
	UntilNext  time.Duration
}

// Bursts groups OutsideFails into bursts.
func (r SoakReport) Bursts() []SoakBurst {
	var out []SoakBurst
	for _, f := range r.OutsideFails {
		if n := len(out); n > 0 && f.At.Sub(out[n-1].To) <= soakBurstGap {
			out[n-1].To = f.At
			out[n-1].Fail += f.Fail
			continue
		}
		out = append(out, SoakBurst{From: f.At, To: f.At, Fail: f.Fail})
	}
	for i := range out {
		b := &out[i]
		for _, w := range r.Windows {
			if !w.To.After(b.From) {
				b.After, b.SinceAfter = w.Name, b.From.Sub(w.To)
			}
			if w.From.After(b.To) && b.Before == "" {
				b.Before, b.UntilNext = w.Name, w.From.Sub(b.To)
			}
		}
	}
	return out
}

func (c Counts) plus(o Counts) Counts { return Counts{c.OK + o.OK, c.Shed + o.Shed, c.Fail + o.Fail} }

// sample reads GET /v1/usage and sums it.
func (c *Chaos) sample(ctx context.Context) (SoakSample, error) {
	var ps []ProcUsage
	if err := c.get(ctx, "/v1/usage", &ps); err != nil {
		return SoakSample{}, err
	}
	smp := SoakSample{At: time.Now(), Procs: len(ps)}
	if s, err := c.stats(ctx); err == nil {
		smp.Devices = s.Devices
	}
	smp.Load1 = load1()
	for _, p := range ps {
		smp.RSS += p.RSS
		smp.PSS += p.PSS
		if p.Goroutines > 0 {
			smp.Goroutines += p.Goroutines
			smp.Reporting++
		}
	}
	return smp, nil
}

// growth of one resource over the samples from from.
func growth(samples []SoakSample, from time.Time, window time.Duration, v func(SoakSample) float64) Growth {
	mins := map[int]float64{}
	for _, s := range samples {
		if s.At.Before(from) {
			continue
		}
		k := int(s.At.Sub(from) / window)
		if m, ok := mins[k]; !ok || v(s) < m {
			mins[k] = v(s)
		}
	}
	if len(mins) == 0 {
		return Growth{}
	}
	keys := make([]int, 0, len(mins))
	for k := range mins {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	g := Growth{First: mins[keys[0]], Last: mins[keys[len(keys)-1]], Windows: len(keys)}
	if g.First > 0 {
		g.Share = g.Last/g.First - 1
	}
	return g
}

// complete are the samples of the whole system: as many processes as the
// most any sample had, each that reports goroutines reporting them. A
// process killed or stopped by a scenario is missing from the others,
// whose sums would read as a floor the system never had.
func complete(samples []SoakSample) []SoakSample {
	procs, rep := 0, 0
	for _, s := range samples {
		procs, rep = max(procs, s.Procs), max(rep, s.Reporting)
	}
	var out []SoakSample
	for _, s := range samples {
		if s.Procs == procs && s.Reporting == rep {
			out = append(out, s)
		}
	}
	return out
}

// measured is where the growth starts.
func (r SoakReport) measured() time.Time {
	if r.Measured.IsZero() {
		return r.Start.Add(r.Config.WarmUp)
	}
	return r.Measured
}

func (r *SoakReport) judge() {
	sc := r.Config
	cs := complete(r.Samples)
	r.Complete = len(cs)
	from := r.measured()
	r.Growth["rss"] = growth(cs, from, sc.GrowthWindow, func(s SoakSample) float64 { return float64(s.RSS) })
	r.Growth["pss"] = growth(cs, from, sc.GrowthWindow, func(s SoakSample) float64 { return float64(s.PSS) })
	r.Growth["goroutines"] = growth(cs, from, sc.GrowthWindow, func(s SoakSample) float64 { return float64(s.Goroutines) })
	r.Reasons = nil
	for _, k := range []string{"rss", "goroutines"} {
		g := r.Growth[k]
		if g.Windows < 2 {
			r.Reasons = append(r.Reasons, fmt.Sprintf("%s: %d growth window(s) after warm-up, need 2", k, g.Windows))
		} else if g.Share > SoakMaxGrowth {
			r.Reasons = append(r.Reasons, fmt.Sprintf("%s grew %.1f%% (> %.0f%%)", k, 100*g.Share, 100*SoakMaxGrowth))
		}
	}
	for _, res := range r.Results {
		if !res.Pass && res.Skipped == "" {
			r.Reasons = append(r.Reasons, res.Name+" FAILed")
		}
	}
	if r.Outside.Fail > 0 {
		r.Reasons = append(r.Reasons, fmt.Sprintf("%d requests failed outside the scenarios' windows", r.Outside.Fail))
	}
	r.Pass = len(r.Reasons) == 0 && len(r.Results) > 0
}

// loadRange is the lowest and highest load average sampled.
func (r SoakReport) loadRange() (lo, hi float64, ok bool) {
	for _, s := range r.Samples {
		if s.Load1 <= 0 {
			continue
		}
		if !ok || s.Load1 < lo {
			lo = s.Load1
		}
		if !ok || s.Load1 > hi {
			hi = s.Load1
		}
		ok = true
	}
	return lo, hi, ok
}

// loadNear is the highest load average sampled from one sample period
// before from to one after to.
func (r SoakReport) loadNear(from, to time.Time) float64 {
	p := r.Config.Sample
	hi := 0.0
	for _, s := range r.Samples {
		if !s.At.Before(from.Add(-p)) && !s.At.After(to.Add(p)) {
			hi = max(hi, s.Load1)
		}
	}
	return hi
}

func (r SoakReport) String() string {
	var b strings.Builder
	v := "FAIL"
	if r.Pass {
		v = "PASS"
	}
	sc := r.Config
	fmt.Fprintf(&b, "soak %s: %v (%s to %s UTC), a scenario every %v, %d samples every %v (%d with every process; the growth is theirs)\n", v, r.End.Sub(r.Start).Round(time.Second),
		r.Start.UTC().Format(time.TimeOnly), r.End.UTC().Format(time.TimeOnly), sc.Every, len(r.Samples), sc.Sample, r.Complete)
	warm := fmt.Sprintf("%v", r.measured().Sub(r.Start).Round(time.Second))
	if sc.WarmUpRounds > 0 {
		warm += fmt.Sprintf(" (%d round(s) of the scenarios)", sc.WarmUpRounds)
	}
	fmt.Fprintf(&b, "  warm-up:   %s; measured %v after it\n", warm, r.End.Sub(r.measured()).Round(time.Second))
	mib := func(x float64) string { return fmt.Sprintf("%.0f MiB", x/(1<<20)) }
	for _, k := range []string{"rss", "pss", "goroutines"} {
		g := r.Growth[k]
		f, l := fmt.Sprintf("%.0f", g.First), fmt.Sprintf("%.0f", g.Last)
		if k != "goroutines" {
			f, l = mib(g.First), mib(g.Last)
		}
		fmt.Fprintf(&b, "  %-10s after warm-up, min of each %v window: first %s, last %s: %+.1f%% over %d windows (target <= %.0f%%)\n",
			k, sc.GrowthWindow, f, l, 100*g.Share, g.Windows, 100*SoakMaxGrowth)
	}
	if n := len(r.Samples); n > 0 {
		f, l := r.Samples[0], r.Samples[n-1]
		fmt.Fprintf(&b, "  devices:   %d at the first sample, %d at the last (scenarios retire the sessions they launch)", f.Devices, l.Devices)
		if f.Devices > 0 && l.Devices > 0 {
			fmt.Fprintf(&b, "; per device: goroutines %.1f -> %.1f, RSS %.1f -> %.1f MiB", float64(f.Goroutines)/float64(f.Devices), float64(l.Goroutines)/float64(l.Devices),
				float64(f.RSS)/float64(f.Devices)/(1<<20), float64(l.RSS)/float64(l.Devices)/(1<<20))
		}
		b.WriteString("\n")
	}
	pass, fail, skip := 0, 0, 0
	for _, res := range r.Results {
		switch {
		case res.Skipped != "":
			skip++
		case res.Pass:
			pass++
		default:
			fail++
		}
	}
	fmt.Fprintf(&b, "  scenarios: %d PASS, %d FAIL, %d SKIPPED:", pass, fail, skip)
	for _, res := range r.Results {
		v := "FAIL"
		switch {
		case res.Skipped != "":
			v = "SKIPPED"
		case res.Pass:
			v = "PASS"
		}
		fmt.Fprintf(&b, " %s %s;", res.Name, v)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  requests outside the windows: %d ok, %d shed, %d failed; inside: %d ok, %d shed, %d failed\n",
		r.Outside.OK, r.Outside.Shed, r.Outside.Fail, r.Inside.OK, r.Inside.Shed, r.Inside.Fail)
	if len(r.OutsideReasons) > 0 {
		ks := sortedKeys(r.OutsideReasons)
		slices.SortStableFunc(ks, func(x, y string) int { return cmp.Compare(r.OutsideReasons[y], r.OutsideReasons[x]) })
		b.WriteString("  outside the windows, shed and failed by kind:")
		for _, k := range ks {
			fmt.Fprintf(&b, " %s %d;", k, r.OutsideReasons[k])
		}
		b.WriteString("\n")
	}
	for _, bu := range r.Bursts() {
		fmt.Fprintf(&b, "  failed outside %s-%s UTC: %d", bu.From.UTC().Format(time.TimeOnly), bu.To.UTC().Format(time.TimeOnly), bu.Fail)
		if bu.After != "" {
			fmt.Fprintf(&b, ", %v after %s's window", bu.SinceAfter.Round(time.Second), bu.After)
		}
		if bu.Before != "" {
			fmt.Fprintf(&b, ", %v before %s's", bu.UntilNext.Round(time.Second), bu.Before)
		}
		if l := r.loadNear(bu.From, bu.To); l > 0 {
			fmt.Fprintf(&b, " (load average %.1f)", l)
		}
		b.WriteString("\n")
	}
	if lo, hi, ok := r.loadRange(); ok {
		fmt.Fprintf(&b, "  load average (1 min, at the samples): %.1f to %.1f\n", lo, hi)
	}
	if len(r.Reasons) > 0 {
		fmt.Fprintf(&b, "  why not PASS: %s\n", strings.Join(r.Reasons, "; "))
	}
	return b.String()
}
