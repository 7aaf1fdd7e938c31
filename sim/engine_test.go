package sim

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/veerhq/veer/failover"
	"github.com/veerhq/veer/outcome"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHeapOrder(t *testing.T) {
	var h eventHeap
	rnd := rand.New(rand.NewPCG(1, 2))
	type key struct {
		t   int64
		tag int
	}
	var pushed []key
	for i := range 2000 {
		k := key{t: int64(rnd.IntN(50)), tag: i}
		pushed = append(pushed, k)
		h.push(event{t: k.t, gen: uint32(i)})
	}
	// Expected: by time, then by push order (stable).
	slices.SortStableFunc(pushed, func(a, b key) int { return cmpInt64(a.t, b.t) })
	for i, want := range pushed {
		e := h.pop()
		if e.t != want.t || int(e.gen) != want.tag {
			t.Fatalf("pop %d = (t %d, tag %d), want (t %d, tag %d)", i, e.t, e.gen, want.t, want.tag)
		}
	}
	if h.len() != 0 {
		t.Fatalf("heap not empty")
	}
}

// recorder is a scripted test policy: it logs every call the engine makes
// and answers with the Action its script gives for the call. Like the real
// policies it repeats its pending wake-up in every Action; a script sets a
// new one (or cancels it with wakeNever).
type recorder struct {
	log    *[]string
	script func(n int, call string) failover.Action
	n      int
	domain int
	wake   time.Time
}

var wakeNever = Epoch.Add(-time.Hour)

func (r *recorder) note(now time.Time, call string) failover.Action {
	s := fmt.Sprintf("%v %s", now.Sub(Epoch), call)
	*r.log = append(*r.log, s)
	r.n++
	a := r.script(r.n, s)
	switch {
	case a.Wake.Equal(wakeNever):
		r.wake = time.Time{}
	case !a.Wake.IsZero():
		r.wake = a.Wake
	}
	a.Wake = r.wake
	if a.Transition.Changed() {
		r.domain = a.Transition.Domain
	}
	return a
}
func (r *recorder) Start(now time.Time, restored int) failover.Action {
	return r.note(now, fmt.Sprintf("start(%d)", restored))
}
func (r *recorder) Domain() int           { return r.domain }
func (r *recorder) State() failover.State { return failover.Primary }
func (r *recorder) Report(now time.Time, d int, o outcome.Outcome) failover.Action {
	return r.note(now, fmt.Sprintf("report(%d,%s)", d, o.Kind))
}
func (r *recorder) CanaryDone(now time.Time, d int, o outcome.Outcome) failover.Action {
	return r.note(now, fmt.Sprintf("canary(%d,%s)", d, o.Kind))
}
func (r *recorder) Tick(now time.Time) failover.Action { return r.note(now, "tick") }
func (r *recorder) NetworkChanged(now time.Time) failover.Action {
	return r.note(now, "netchange")
}

var _ failover.Policy = (*recorder)(nil)

// quietScenario has one loss-free network without jitter and a fixed server
// time, so latencies can be computed by hand.
func quietScenario() Scenario {
	sc := Default()
	sc.Networks = []Network{{Name: "n", Share: 1, RTT: 40 * time.Millisecond,
		GoodMean: 1000 * time.Hour, BadMean: time.Millisecond}}
	sc.Server = ServerSpec{Median: 60 * time.Millisecond, Canary: 5 * time.Millisecond}
	sc.QualitySigma = 0
	return sc
}

func TestEngineStepTable(t *testing.T) {
	sc := quietScenario()
	m, err := compile(&sc, "")
	if err != nil {
		t.Fatal(err)
	}
	s := int64(time.Second)
	r := &realisation{
		start: 0, end: 60 * s,
		segs: []netSeg{{from: 0, net: 0}},
		reqs: []request{
			{t: 1 * s, rttF: 1, server: int64(60 * time.Millisecond)},
			{t: 2 * s, rttF: 1, server: int64(60 * time.Millisecond)},
			{t: 3 * s, rttF: 1, server: int64(60 * time.Millisecond), flags: flagOffline},
		},
		down:   []span{{2500 * int64(time.Millisecond), 3500 * int64(time.Millisecond)}},
		kills:  []int64{2500 * int64(time.Millisecond), 30 * s},
		events: []sessEvent{{t: 30 * s, kind: evRelaunch}},
	}
	at := func(d time.Duration) time.Time { return Epoch.Add(d) }
	var log []string
	script := func(n int, call string) failover.Action {
		a := failover.Action{Canary: failover.None}
		switch call {
		case "0s start(-1)":
			a.Wake = at(5 * time.Second)
		case "5s tick":
			a.Canary, a.Wake = 1, at(20*time.Second) // 20s is replaced below
		case "8s tick":
			a.Wake = wakeNever
		case "5.345s canary(1,success)":
			a.Transition = failover.Transition{From: failover.Failover, To: failover.Backup,
				Reason: failover.ReasonCanarySuccess, Domain: 1}
			a.Wake = at(8 * time.Second)
		}
		return a
	}
	x := &runner{m: m}
	var lat []int64
	x.run(r, func() failover.Policy { return &recorder{log: &log, script: script} }, func(us int64) { lat = append(lat, us) })
	want := []string{
		"0s start(-1)",
		// cold: DNS 40ms + QUIC handshake 45ms + request 45ms + server 60ms
		"1.19s report(0,success)",
		// warm: 45ms + 60ms
		"2.105s report(0,success)",
		"5s tick",
		// cold dc1 over TCP: DNS 40ms + 2x100ms handshakes + 100ms + 5ms
		"5.345s canary(1,success)",
		"8s tick", // the wake-up at 20s was replaced and never fires
		// the request sent offline at 3s on a connection the tunnel
		// killed, with the address cached: dial timeout
		"13s report(0,connect_timeout)",
		// the relaunch starts with the persisted backup
		"30s start(1)",
	}
	if !slices.Equal(log, want) {
		t.Errorf("calls:\n got %q\nwant %q", log, want)
	}
	if want := []int64{190000, 105000}; !slices.Equal(lat, want) {
		t.Errorf("latencies µs = %v, want %v", lat, want)
	}
	if x.st.requests != 3 || x.st.errors != 1 || x.st.canaries != 1 || x.st.failovers != 1 || x.st.quic != 2 {
		t.Errorf("stats = %+v", x.st)
	}
}

func TestOutageKinds(t *testing.T) {
	// One request on a cold connection and one on a warm one, against
	// each outage kind of the primary.
	s := int64(time.Second)
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		kind       string
		cold, warm outcome.Kind
		coldLat    int64
	}{
		{KindDNSFailure, outcome.DNSServerFailure, outcome.Success, 40 * ms},
		{KindDNSTimeout, outcome.DNSTimeout, outcome.Success, 5 * s},
		{KindConnectRefused, outcome.ConnectRefused, outcome.ConnectionReset, 85 * ms},
		{KindConnectTimeout, outcome.ConnectTimeout, outcome.ResponseTimeout, 10*s + 40*ms},
		{KindTLSFailure, outcome.TLSHandshake, outcome.Success, 85 * ms},
		{KindServerError, outcome.ServerError, outcome.ServerError, 190 * ms},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			sc := quietScenario()
			sc.Outages = []Outage{{Kind: tc.kind, Start: 10 * time.Second, End: time.Minute}}
			m, err := compile(&sc, "")
			if err != nil {
				t.Fatal(err)
			}
			x := &runner{m: m, r: &realisation{segs: []netSeg{{}}, outages: []int{0}}}
			// Warm the connection before the outage.
			if k, _, _ := x.attempt(5*s, 0, 0, 0, 1, 60*ms, false); k != outcome.Success {
				t.Fatalf("before the outage: %v", k)
			}
			k, _, _ := x.attempt(11*s, 0, 0, 0, 1, 60*ms, false)
			if k != tc.warm {
				t.Errorf("warm: %v, want %v", k, tc.warm)
			}
			// A cold connection with an expired address.
			x.conns = [maxDomains]conn{}
			k, lat, _ := x.attempt(20*s, 0, 0, 0, 1, 60*ms, false)
			if k != tc.cold || lat != tc.coldLat {
				t.Errorf("cold: %v after %v, want %v after %v", k, time.Duration(lat), tc.cold, time.Duration(tc.coldLat))
			}
			// A backup is not affected.
			if k, _, _ := x.attempt(20*s, 1, 0, 0, 1, 60*ms, false); k != outcome.Success {
				t.Errorf("backup: %v", k)
			}
		})
	}
}

func runJSON(t *testing.T, sc *Scenario, strategies []Strategy, opt Options) []byte {
	t.Helper()
	res, err := Run(context.Background(), sc, strategies, opt)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, FormatJSON, res); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDeterminism(t *testing.T) {
	sc, err := LoadBundled("flapping")
	if err != nil {
		t.Fatal(err)
	}
	one := runJSON(t, sc, Strategies(), Options{Sessions: 300, Workers: 1})
	four := runJSON(t, sc, Strategies(), Options{Sessions: 300, Workers: 4})
	again := runJSON(t, sc, Strategies(), Options{Sessions: 300, Workers: 3})
	if !bytes.Equal(one, four) || !bytes.Equal(one, again) {
		t.Fatalf("output depends on the worker count:\n%s\n%s", one, four)
	}
	seed := uint64(2)
	other := runJSON(t, sc, Strategies(), Options{Sessions: 300, Workers: 2, Seed: &seed})
	if bytes.Equal(one, other) {
		t.Fatal("a different seed gave the same output")
	}
}

func TestPairedStreams(t *testing.T) {
	sc := Default()
	m, err := compile(&sc, "")
	if err != nil {
		t.Fatal(err)
	}
	// Session 7's realisation does not depend on what was generated
	// before it in the same buffers.
	var a, b realisation
	m.generate(&a, 1, 7)
	for i := range 20 {
		m.generate(&b, 1, i)
	}
	m.generate(&b, 1, 7)
	if !slices.Equal(a.reqs, b.reqs) || !slices.Equal(a.down, b.down) || !slices.Equal(a.bad, b.bad) || a.devErrors != b.devErrors {
		t.Fatal("realisation of session 7 depends on history")
	}
	// Every strategy sees the same sessions, requests and device failures:
	// without domain outages every failure is the device's own, so all
	// strategies have the same request count and error rate, in every
	// bucket.
	res, err := Run(context.Background(), &sc, Strategies(), Options{Sessions: 400})
	if err != nil {
		t.Fatal(err)
	}
	base := res.Strategies["uber"]
	for _, name := range []string{"uber-confirm", "roundrobin", "threshold"} {
		s := res.Strategies[name]
		if s.Requests != base.Requests || s.ErrorRate != base.ErrorRate {
			t.Errorf("%s: %d requests, error rate %v; uber: %d, %v", name, s.Requests, s.ErrorRate, base.Requests, base.ErrorRate)
		}
		for _, c := range res.Conditions {
			if s.ByCondition[c].Sessions != base.ByCondition[c].Sessions || s.ByCondition[c].Requests != base.ByCondition[c].Requests {
				t.Errorf("%s: bucket %s differs", name, c)
			}
		}
	}
	if base.ErrorRate != res.DeviceErrorRate {
		t.Errorf("error rate %v, device error rate %v", base.ErrorRate, res.DeviceErrorRate)
	}
}

// TestPhaseMeasures: a flapping primary outage is measured per down phase.
// A scripted policy leaves the primary 2 s into the first down phase,
// returns 10 s into the following up phase, misses the second down phase,
// is still on the backup when the fourth one starts and when the session
// ends.
func TestPhaseMeasures(t *testing.T) {
	sc := quietScenario()
	s := int64(time.Second)
	sc.Outages = []Outage{{Kind: KindConnectRefused, Start: 10 * time.Second, End: 130 * time.Second,
		Flap: &Flap{Down: 10 * time.Second, Up: 20 * time.Second}}}
	m, err := compile(&sc, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []span{{10 * s, 20 * s}, {40 * s, 50 * s}, {70 * s, 80 * s}, {100 * s, 110 * s}}; !slices.Equal(m.outages[0].down, want) {
		t.Fatalf("down phases %v, want %v", m.outages[0].down, want)
	}
	r := &realisation{start: 0, end: 150 * s, segs: []netSeg{{from: 0, net: 0}}, outages: []int{0}}
	r.events = append(r.events, sessEvent{t: 10 * s, kind: evOutageStart})
	for _, d := range m.outages[0].down {
		r.events = append(r.events, sessEvent{t: d.from, kind: evPhaseStart}, sessEvent{t: d.to, kind: evPhaseEnd})
	}
	r.events = append(r.events, sessEvent{t: 130 * s, kind: evOutageEnd})
	slices.SortStableFunc(r.events, func(x, y sessEvent) int { return cmpInt64(x.t, y.t) })
	at := func(sec int64) time.Time { return Epoch.Add(time.Duration(sec * s)) }
	move := func(d int, wake time.Time) failover.Action {
		to := failover.Backup
		if d == 0 {
			to = failover.Primary
		}
		return failover.Action{Canary: failover.None, Wake: wake,
			Transition: failover.Transition{From: failover.Primary, To: to, Reason: failover.ReasonCanarySuccess, Domain: d}}
	}
	var log []string
	script := func(n int, call string) failover.Action {
		switch call {
		case "0s start(-1)":
			return failover.Action{Canary: failover.None, Wake: at(12)}
		case "12s tick":
			return move(1, at(30))
		case "30s tick":
			return move(0, at(60))
		case "1m0s tick":
			return move(1, wakeNever)
		}
		return failover.Action{Canary: failover.None}
	}
	x := &runner{m: m}
	x.run(r, func() failover.Policy { return &recorder{log: &log, script: script} }, func(int64) {})
	if want := []string{"0s start(-1)", "12s tick", "30s tick", "1m0s tick"}; !slices.Equal(log, want) {
		t.Fatalf("calls %q, want %q", log, want)
	}
	p := &x.phase
	if !slices.Equal(p.detect, []int64{2 * s}) || !slices.Equal(p.recover, []int64{10 * s}) ||
		p.undetected != 1 || p.unrecovered != 1 || p.censored != 1 {
		t.Errorf("phases: detect %v recover %v undetected %d unrecovered %d censored %d; want [2s] [10s] 1 1 1",
			p.detect, p.recover, p.undetected, p.unrecovered, p.censored)
	}
	// The whole-window measures are unchanged: detected at 12 s from the
	// window's start at 10 s, still off primary when it ends at 130 s.
	if !slices.Equal(x.detect, []int64{2 * s}) || len(x.recover) != 0 || x.censored != 1 {
		t.Errorf("window: detect %v recover %v censored %d", x.detect, x.recover, x.censored)
	}

	// generate emits the phase events of every session the outage covers,
	// clipped to the session.
	sc.Outages[0].Start, sc.Outages[0].End = 10*time.Minute, 40*time.Minute
	sc.Outages[0].Flap = &Flap{Down: 2 * time.Minute, Up: time.Minute}
	m, err = compile(&sc, "")
	if err != nil {
		t.Fatal(err)
	}
	var g realisation
	covered := 0
	for i := range 50 {
		m.generate(&g, 1, i)
		var got, want []sessEvent
		for _, e := range g.events {
			if e.kind == evPhaseStart || e.kind == evPhaseEnd {
				got = append(got, e)
			}
		}
		if len(g.outages) > 0 {
			covered++
			for _, d := range m.outages[0].down {
				if d.from >= g.start && d.from < g.end {
					want = append(want, sessEvent{t: d.from, kind: evPhaseStart})
				}
				if d.to >= g.start && d.to < g.end {
					want = append(want, sessEvent{t: d.to, kind: evPhaseEnd})
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("session %d [%v, %v): phase events %v, want %v", i, g.start, g.end, got, want)
		}
	}
	if covered < 10 {
		t.Fatalf("only %d of 50 sessions overlap the outage", covered)
	}
}
