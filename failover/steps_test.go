package failover

import (
	"fmt"
	"testing"
	"time"

	"github.com/veerhq/veer/outcome"
)

// sec is a shorthand for offsets in the step tables.
func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

const noWake = time.Duration(-1)

// event is one input of a step table.
type event struct {
	kind   string // start, report, canary, tick, netchange, status, network
	domain int
	o      outcome.Kind
	status int    // status: the HTTP status of a regular answer
	net    string // network: the network SetNetwork reports
}

func start(restored int) event        { return event{kind: "start", domain: restored} }
func rep(d int, k outcome.Kind) event { return event{kind: "report", domain: d, o: k} }
func can(d int, k outcome.Kind) event { return event{kind: "canary", domain: d, o: k} }
func tick() event                     { return event{kind: "tick"} }
func netChanged() event               { return event{kind: "netchange"} }
func status(d, code int) event        { return event{kind: "status", domain: d, status: code} }
func network(n string) event          { return event{kind: "network", net: n} }
func (e event) String() string {
	switch e.kind {
	case "report", "canary":
		return fmt.Sprintf("%s(%d,%v)", e.kind, e.domain, e.o)
	case "start":
		return fmt.Sprintf("start(%d)", e.domain)
	case "status":
		return fmt.Sprintf("status(%d,%d)", e.domain, e.status)
	case "network":
		return fmt.Sprintf("network(%s)", e.net)
	}
	return e.kind
}

// step: at time t0+at, event ev gives this state, domain, canary request,
// wake-up (offset from t0, noWake for none) and transition reason
// (ReasonNone: no transition).
type step struct {
	at     time.Duration
	ev     event
	state  State
	domain int
	canary int
	wake   time.Duration
	reason Reason
}

func apply(p Policy, now time.Time, e event) Action {
	switch e.kind {
	case "start":
		return p.Start(now, e.domain)
	case "report":
		return p.Report(now, e.domain, outcome.Of(e.o))
	case "canary":
		return p.CanaryDone(now, e.domain, outcome.Of(e.o))
	case "tick":
		return p.Tick(now)
	case "netchange":
		return p.NetworkChanged(now)
	case "status":
		return p.Report(now, e.domain, outcome.Outcome{Kind: outcome.FromHTTPStatus(e.status), Status: e.status})
	case "network":
		return p.(NetworkAware).SetNetwork(now, e.net)
	}
	panic("unknown event " + e.kind)
}

func runSteps(t *testing.T, p Policy, steps []step) {
	t.Helper()
	prev := p.State()
	for i, s := range steps {
		a := apply(p, t0.Add(s.at), s.ev)
		where := fmt.Sprintf("step %d (t=%v %v)", i, s.at, s.ev)
		if got := p.State(); got != s.state {
			t.Fatalf("%s: state %v, want %v", where, got, s.state)
		}
		if got := p.Domain(); got != s.domain {
			t.Fatalf("%s: domain %d, want %d", where, got, s.domain)
		}
		if a.Canary != s.canary {
			t.Fatalf("%s: canary %d, want %d", where, a.Canary, s.canary)
		}
		wantWake := time.Time{}
		if s.wake != noWake {
			wantWake = t0.Add(s.wake)
		}
		if !a.Wake.Equal(wantWake) {
			t.Fatalf("%s: wake %v, want %v", where, offset(a.Wake), offset(wantWake))
		}
		if a.Transition.Reason != s.reason {
			t.Fatalf("%s: reason %v, want %v", where, a.Transition.Reason, s.reason)
		}
		if s.reason != ReasonNone {
			tr := a.Transition
			if !tr.Changed() || tr.From != prev || tr.To != s.state || tr.Domain != s.domain {
				t.Fatalf("%s: transition %+v, want %v->%v domain %d", where, tr, prev, s.state, s.domain)
			}
		} else if a.Transition.Changed() {
			t.Fatalf("%s: unexpected transition %+v", where, a.Transition)
		}
		prev = p.State()
	}
}

func offset(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.Sub(t0).String()
}

// testConfig: X=3 within Y=10s, T=30s, recovery 10s + 10s per entry up to
// 40s, decay 1h, canary rounds 5s apart, two backups.
func testConfig() Config {
	return Config{
		Primary:             "api.example.com",
		Backups:             []string{"dc1.example.com", "dc2.example.com"},
		FailureThreshold:    3,
		FailureWindow:       sec(10),
		FailureTimeout:      sec(30),
		RecoveryTimeout:     sec(10),
		RecoveryTimeoutStep: sec(10),
		RecoveryTimeoutMax:  sec(40),
		RecoveryDecay:       time.Hour,
		CanaryRetryInterval: sec(5),
		CanaryRetryMax:      sec(20),
	}
}

const (
	ok       = outcome.Success
	refused  = outcome.ConnectRefused
	dnsFail  = outcome.DNSTimeout
	timeout  = outcome.ConnectTimeout
	srvError = outcome.ServerError
)
