package control_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/release"
	"github.com/veerhq/veer/store"
)

func publishCounts(t *testing.T, st store.Store, gw string, c release.StepCounts) {
	t.Helper()
	b, _ := json.Marshal(c)
	if _, err := st.Put(context.Background(), release.CountsKey(c.Route, gw), b, store.Write{}); err != nil {
		t.Fatal(err)
	}
}

func rolloutOf(t *testing.T, r resp) control.RolloutStatus {
	t.Helper()
	var s control.RolloutStatus
	if err := json.Unmarshal([]byte(r.body), &s); err != nil {
		t.Fatalf("%d %s: %v", r.code, r.body, err)
	}
	return s
}

// The admin API refuses a bad plan naming the field, a second start while
// one runs (409) and an action that does not fit; the analysis promotes a
// healthy step and aborts a bad one on the counts pooled over the
// gateways, each decision audited with its verdict's reason.
func TestRolloutAPIAndAnalysis(t *testing.T) {
	clk := clock.NewManual(time.Unix(10000, 0))
	e := start(t, control.Config{}, control.Options{Clock: clk, Logger: obs.Discard, RolloutInterval: time.Hour}) // the test calls JudgeRollouts itself
	ctx := context.Background()
	post := func(body string) resp {
		return e.admin("POST", "/v1/admin/rollouts/api", e.token, []byte(body), "X-Veer-Reason", "test")
	}
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{"action":"start","plan":{"from":"v1","to":"v2","rings":[10,5,100]}}`, 400, "rings[1]"},
		{`{"action":"start","plan":{"from":"v1","to":"v1"}}`, 400, "to"},
		{`{"action":"start","plan":{"from":"v1","to":"v2","bogus":1}}`, 400, "bogus"},
		{`{"action":"start","plan":{"route":"web","from":"v1","to":"v2"}}`, 400, "plan.route"},
		{`{"action":"start"}`, 400, "plan"},
		{`{"action":"launch"}`, 400, "action"},
		{`{"action":"pause"}`, 404, "no rollout"},
	} {
		if r := post(c.body); r.code != c.code || !strings.Contains(r.body, c.want) {
			t.Errorf("POST %s = %d %s, want %d with %q", c.body, r.code, r.body, c.code, c.want)
		}
	}
	if r := e.admin("POST", "/v1/admin/rollouts/api", "", []byte(`{"action":"abort"}`)); r.code != 401 {
		t.Errorf("no token: %d", r.code)
	}

	r := post(`{"action":"start","plan":{"from":"v1","to":"v2","canary_tenants":["acme"],"hold":"10m","no_drain":true,"slo":{"min_samples":100}},"reason":"v2 release"}`)
	if r.code != 200 {
		t.Fatalf("start: %d %s", r.code, r.body)
	}
	rs := rolloutOf(t, r)
	ro := rs.Rollout
	if ro.Status != release.Running || ro.Step != 0 || ro.Plan.Hold != 10*time.Minute {
		t.Fatalf("started %+v", ro)
	}
	if len(rs.Warnings) != 1 || !strings.Contains(rs.Warnings[0], "no gateway announced") {
		t.Fatalf("started without announced gateways: warnings %q, want the one that says so", rs.Warnings)
	}
	if r := post(`{"action":"start","plan":{"from":"v1","to":"v2"}}`); r.code != 409 {
		t.Fatalf("second start: %d %s", r.code, r.body)
	}
	if r := post(`{"action":"resume"}`); r.code != 409 {
		t.Fatalf("resume a running rollout: %d %s", r.code, r.body)
	}

	st := e.svc.Store()
	// step 0, healthy: two gateways, B as good as A
	publishCounts(t, st, "gw1", release.StepCounts{Route: "api", ID: ro.ID, Step: 0, A: release.Counts{Requests: 5000, Errors: 10}, B: release.Counts{Requests: 400}})
	publishCounts(t, st, "gw2", release.StepCounts{Route: "api", ID: ro.ID, Step: 0, A: release.Counts{Requests: 5000, Errors: 10}, B: release.Counts{Requests: 400, Errors: 1}})
	publishCounts(t, st, "gw3", release.StepCounts{Route: "api", ID: "old", Step: 0, B: release.Counts{Requests: 400, Errors: 400}}) // another rollout's
	g := rolloutOf(t, e.admin("GET", "/v1/admin/rollouts/api", e.token, nil))
	if g.Gateways != 2 || g.B.Requests != 800 || g.B.Errors != 1 || g.A.Requests != 10000 || g.Verdict.Decision != release.Promote {
		t.Fatalf("status %+v", g)
	}
	clk.Advance(time.Second)
	changed, err := e.svc.JudgeRollouts(ctx, clk.Now())
	if err != nil || len(changed) != 1 || changed[0].Step != 1 || changed[0].Status != release.Running {
		t.Fatalf("JudgeRollouts = %+v, %v", changed, err)
	}
	// nothing new for step 1 yet: no change
	if changed, _ := e.svc.JudgeRollouts(ctx, clk.Now()); len(changed) != 0 {
		t.Fatalf("judged again without counts: %+v", changed)
	}
	// paused: not judged
	if r := post(`{"action":"pause","reason":"look at logs"}`); r.code != 200 || rolloutOf(t, r).Rollout.Status != release.Paused {
		t.Fatalf("pause: %d %s", r.code, r.body)
	}
	publishCounts(t, st, "gw1", release.StepCounts{Route: "api", ID: ro.ID, Step: 1, A: release.Counts{Requests: 5000, Errors: 10}, B: release.Counts{Requests: 100, Errors: 10}})
	if changed, _ := e.svc.JudgeRollouts(ctx, clk.Now()); len(changed) != 0 {
		t.Fatalf("judged a paused rollout: %+v", changed)
	}
	if r := post(`{"action":"resume"}`); r.code != 200 {
		t.Fatalf("resume: %d %s", r.code, r.body)
	}
	// step 1, B failing 10 %: aborted, every tenant back on A
	changed, err = e.svc.JudgeRollouts(ctx, clk.Now())
	if err != nil || len(changed) != 1 || changed[0].Status != release.Aborted || changed[0].Assign("acme") != release.A {
		t.Fatalf("JudgeRollouts (bad B) = %+v, %v", changed, err)
	}
	if r := post(`{"action":"abort"}`); r.code != 409 {
		t.Fatalf("abort an aborted rollout: %d %s", r.code, r.body)
	}
	hist, err := st.History(ctx, release.KeyPrefix+"api", 0)
	if err != nil {
		t.Fatal(err)
	}
	var audit []string
	for _, h := range hist {
		audit = append(audit, h.Author+": "+h.Reason)
	}
	got := strings.Join(audit, "\n")
	for _, want := range []string{"control rollout analysis: step 1: abort: error rate above A's", "rollout resume", "rollout pause: look at logs", "control rollout analysis: step 0: promote", "rollout start: v2 release"} {
		if !strings.Contains(got, want) {
			t.Errorf("audit lacks %q:\n%s", want, got)
		}
	}
	// a new rollout may start once the last is not active
	if r := post(`{"action":"start","plan":{"from":"v1","to":"v2","blue_green":true}}`); r.code != 200 {
		t.Fatalf("restart: %d %s", r.code, r.body)
	}
}

// The service's own loop judges on its clock: advancing it past the
// interval promotes a healthy blue-green step to done.
func TestRolloutLoop(t *testing.T) {
	clk := clock.NewManual(time.Unix(10000, 0))
	e := start(t, control.Config{}, control.Options{Clock: clk, Logger: obs.Discard, RolloutInterval: time.Second})
	r := e.admin("POST", "/v1/admin/rollouts/api", e.token, []byte(`{"action":"start","plan":{"from":"v1","to":"v2","blue_green":true,"slo":{"min_samples":100}}}`))
	if r.code != 200 {
		t.Fatalf("start: %d %s", r.code, r.body)
	}
	ro := rolloutOf(t, r)
	st := e.svc.Store()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := st.Watch(ctx, release.KeyPrefix, 1)
	next := func() release.Rollout {
		t.Helper()
		for ev := range w {
			if ev.Doc.Version <= ro.Version {
				continue
			}
			got, err := release.ParseRollout(ev.Doc.Value, ev.Doc.Key)
			if err != nil {
				t.Fatal(err)
			}
			ro.Version = ev.Doc.Version
			return got
		}
		t.Fatal("watch ended")
		return release.Rollout{}
	}
	if !ro.Rollout.Draining {
		t.Fatalf("started %+v: not draining", ro.Rollout)
	}
	// the drain: gw1 (the only one reporting, none announced) idle
	publishCounts(t, st, "gw1", release.StepCounts{Route: "api", ID: ro.Rollout.ID, Step: -1, Draining: true})
	clk.Advance(time.Second) // the loop's ticker exists once Start returned
	if got := next(); got.Draining || got.Status != release.Running || got.Step != 0 || got.Reason != "drained: v2 idle on every gateway (1: gw1)" {
		t.Fatalf("loop wrote %+v, want the drain over", got)
	}
	publishCounts(t, st, "gw1", release.StepCounts{Route: "api", ID: ro.Rollout.ID, A: release.Counts{Requests: 5000}, B: release.Counts{Requests: 1000}})
	clk.Advance(time.Second)
	if got := next(); got.Status != release.Done {
		t.Fatalf("loop wrote %+v, want done", got)
	}
}

// The drain that begins a rollout waits for every announced gateway to
// report B idle, and ends at its timeout when one never does; GET says what
// it waits for.
func TestRolloutDrain(t *testing.T) {
	clk := clock.NewManual(time.Unix(10000, 0))
	e := start(t, control.Config{}, control.Options{Clock: clk, Logger: obs.Discard, RolloutInterval: time.Hour})
	ctx := context.Background()
	st := e.svc.Store()
	for _, gw := range []string{"gw1", "gw2"} {
		b, _ := json.Marshal(store.Announcement{Name: gw, Admin: "http://127.0.0.1:1", Routes: []store.AnnouncedRoute{{Name: "api", Clusters: []string{"v1", "v2"}}}})
		if _, err := st.Put(ctx, store.KeyGatewaysPrefix+gw, b, store.Write{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name     string
		publish  map[string]int64 // gateway -> in flight on B
		advance  time.Duration
		draining bool
		why      string
	}{
		{"nothing reported", nil, time.Second, true, "waiting for gw1 (not reported), gw2 (not reported)"},
		{"gw2 busy", map[string]int64{"gw1": 0, "gw2": 3}, time.Second, true, "waiting for gw2 (3 in flight)"},
		{"both idle", map[string]int64{"gw2": 0}, time.Second, false, "drained: v2 idle on every gateway (2: gw1, gw2)"},
	} {
		if c.name == "nothing reported" {
			r := e.admin("POST", "/v1/admin/rollouts/api", e.token, []byte(`{"action":"start","plan":{"from":"v1","to":"v2"}}`))
			if r.code != 200 {
				t.Fatalf("start: %d %s", r.code, r.body)
			}
		}
		ro, _ := e.svc.Store().Get(ctx, release.KeyPrefix+"api")
		cur, _ := release.ParseRollout(ro.Value, ro.Key)
		for gw, n := range c.publish {
			publishCounts(t, st, gw, release.StepCounts{Route: "api", ID: cur.ID, Step: -1, Draining: true, InFlightB: n})
		}
		if c.draining {
			g := rolloutOf(t, e.admin("GET", "/v1/admin/rollouts/api", e.token, nil))
			if !strings.Contains(g.Verdict.Reason, c.why) {
				t.Fatalf("%s: GET verdict %q, want %q", c.name, g.Verdict.Reason, c.why)
			}
		}
		clk.Advance(c.advance)
		if _, err := e.svc.JudgeRollouts(ctx, clk.Now()); err != nil {
			t.Fatal(err)
		}
		ro, _ = e.svc.Store().Get(ctx, release.KeyPrefix+"api")
		got, _ := release.ParseRollout(ro.Value, ro.Key)
		if got.Draining != c.draining || got.Serving() != map[bool]int{true: -1, false: 0}[c.draining] || (!c.draining && got.Reason != c.why) {
			t.Fatalf("%s: %+v", c.name, got)
		}
	}
	// a second rollout whose gw2 stays busy: the drain ends at its timeout
	r := e.admin("POST", "/v1/admin/rollouts/api", e.token, []byte(`{"action":"abort"}`))
	if r.code != 200 {
		t.Fatalf("abort: %d %s", r.code, r.body)
	}
	r = e.admin("POST", "/v1/admin/rollouts/api", e.token, []byte(`{"action":"start","plan":{"from":"v1","to":"v2","drain_timeout":"10s"}}`))
	if r.code != 200 {
		t.Fatalf("start: %d %s", r.code, r.body)
	}
	id := rolloutOf(t, r).Rollout.ID
	publishCounts(t, st, "gw1", release.StepCounts{Route: "api", ID: id, Step: -1, Draining: true})
	publishCounts(t, st, "gw2", release.StepCounts{Route: "api", ID: id, Step: -1, Draining: true, InFlightB: 1})
	for _, adv := range []time.Duration{9 * time.Second, time.Second} {
		clk.Advance(adv)
		if _, err := e.svc.JudgeRollouts(ctx, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := e.svc.Store().Get(ctx, release.KeyPrefix+"api")
	got, _ := release.ParseRollout(d.Value, d.Key)
	if got.Draining || got.Step != 0 || got.Reason != "drained: drain timeout 10s over; not idle: gw2 (1 in flight)" {
		t.Fatalf("at the drain timeout: %+v", got)
	}
	h, _ := e.svc.Store().History(ctx, release.KeyPrefix+"api", 0)
	if len(h) == 0 || !strings.Contains(h[0].Reason, "drain timeout 10s over") {
		t.Fatalf("the drain's end is not audited with its figures: %+v", h)
	}
}

// A plan naming a route or a cluster that an announced gateway lacks is
// refused with 400 naming the plan's field and the gateway, and nothing is
// written; announcements that cannot be checked (an older gateway's
// without routes, a truncated list) are warnings.
func TestRolloutStartCheckedAgainstGateways(t *testing.T) {
	e := start(t, control.Config{}, control.Options{Logger: obs.Discard, RolloutInterval: time.Hour})
	ctx := context.Background()
	announce := func(a store.Announcement) {
		t.Helper()
		b, _ := json.Marshal(a)
		if _, err := e.svc.Store().Put(ctx, store.KeyGatewaysPrefix+a.Name, b, store.Write{}); err != nil {
			t.Fatal(err)
		}
	}
	announce(store.Announcement{Name: "gw-a", Admin: "http://127.0.0.1:1", Routes: []store.AnnouncedRoute{{Name: "api", Clusters: []string{"a1", "a2"}}}})
	announce(store.Announcement{Name: "gw-b", Admin: "http://127.0.0.1:2", Routes: []store.AnnouncedRoute{{Name: "api", Clusters: []string{"a1", "a2", "a3"}}, {Name: "web", Clusters: []string{"w1", "w2"}}}})
	post := func(route, body string) resp {
		return e.admin("POST", "/v1/admin/rollouts/"+route, e.token, []byte(body), "X-Veer-Reason", "test")
	}
	for _, c := range []struct {
		route, plan string
		want        []string
	}{
		{"api", `{"from":"a1","to":"a3"}`, []string{`plan.to: cluster "a3" is not a cluster of route "api" on gateway gw-a`}},
		{"api", `{"from":"a0","to":"a2"}`, []string{`plan.from: cluster "a0" is not a cluster of route "api" on gateway gw-a`, `plan.from: cluster "a0" is not a cluster of route "api" on gateway gw-b`}},
		{"web", `{"from":"w1","to":"w2"}`, []string{`plan.route: "web" is not a route of gateway gw-a`}},
	} {
		r := post(c.route, `{"action":"start","plan":`+c.plan+`}`)
		if r.code != 400 {
			t.Errorf("start %s %s: %d %s, want 400", c.route, c.plan, r.code, r.body)
			continue
		}
		var body struct{ Error string }
		json.Unmarshal([]byte(r.body), &body)
		for _, w := range c.want {
			if !strings.Contains(body.Error, w) {
				t.Errorf("start %s %s: %s, want %q in it", c.route, c.plan, r.body, w)
			}
		}
		if _, err := e.svc.Store().Get(ctx, release.KeyPrefix+c.route); err == nil {
			t.Errorf("start %s %s refused but a rollout was written", c.route, c.plan)
		}
	}
	// every gateway has api with a1 and a2: accepted, no warning
	r := post("api", `{"action":"start","plan":{"from":"a1","to":"a2"}}`)
	if rs := rolloutOf(t, r); r.code != 200 || len(rs.Warnings) != 0 {
		t.Fatalf("a plan every gateway can run: %d %s", r.code, r.body)
	}
	// an older gateway (no routes) and a truncated list are not checked: warnings
	announce(store.Announcement{Name: "gw-old", Admin: "http://127.0.0.1:3"})
	announce(store.Announcement{Name: "gw-big", Admin: "http://127.0.0.1:4", Routes: []store.AnnouncedRoute{{Name: "api", Clusters: []string{"a1", "a2"}}}, Truncated: true})
	announce(store.Announcement{Name: "gw-a", Admin: "http://127.0.0.1:1", Routes: []store.AnnouncedRoute{{Name: "api", Clusters: []string{"a1", "a2"}}, {Name: "web", Clusters: []string{"w1", "w2"}}}})
	r = post("web", `{"action":"start","plan":{"from":"w1","to":"w2"}}`)
	rs := rolloutOf(t, r)
	if r.code != 200 || len(rs.Warnings) != 2 || !strings.Contains(rs.Warnings[0], "gw-big announces only its first 1 routes") || !strings.Contains(rs.Warnings[1], "gw-old announces no routes") {
		t.Fatalf("start with unchecked gateways: %d %s, want 200 with two warnings", r.code, r.body)
	}
}
