package failover

import (
	"fmt"
	"testing"
	"time"

	"github.com/veerhq/veer/outcome"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

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

func TestUberSteps(t *testing.T) {
	n := None
	confirm := func(c *Config) { c.ConfirmPrimary = true }
	cases := []struct {
		name  string
		cfg   func(*Config)
		steps []step
	}{
		{"X failures within Y: failover, first canary wins, recovery back", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(2), rep(0, dnsFail), Primary, 0, n, sec(31), ReasonNone},
			{sec(3), rep(0, timeout), Failover, 0, 1, noWake, ReasonFailures},
			{sec(4), can(1, ok), Backup, 1, n, sec(14), ReasonCanarySuccess},
			{sec(5), rep(1, ok), Backup, 1, n, sec(14), ReasonNone},
			{sec(13), tick(), Backup, 1, n, sec(14), ReasonNone}, // early tick: nothing
			{sec(14), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(15), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"failures spread wider than Y do not trigger", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{sec(6), rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{sec(12), rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{sec(13), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures}, // 6,12,13 within 10s
		}},
		{"a success breaks the streak", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(2), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(3), rep(0, ok), Primary, 0, n, noWake, ReasonNone},
			{sec(4), rep(0, refused), Primary, 0, n, sec(34), ReasonNone},
			{sec(5), rep(0, refused), Primary, 0, n, sec(34), ReasonNone},
			{sec(6), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
		}},
		{"HTTP errors from a reachable server are not failures", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, srvError), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, outcome.Overloaded), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, outcome.Limited), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, outcome.ClientError), Primary, 0, n, noWake, ReasonNone},
			{sec(2), rep(0, refused), Primary, 0, n, sec(32), ReasonNone},
			{sec(3), rep(0, refused), Primary, 0, n, sec(32), ReasonNone},
			{sec(4), rep(0, srvError), Primary, 0, n, noWake, ReasonNone}, // server reached: streak over
			{sec(5), rep(0, refused), Primary, 0, n, sec(35), ReasonNone},
		}},
		{"client cancellations are ignored", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(2), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(3), rep(0, outcome.ClientCanceled), Primary, 0, n, sec(31), ReasonNone},
			{sec(4), rep(0, outcome.ResponseTimeout), Failover, 0, 1, noWake, ReasonFailures},
		}},
		{"low traffic: a streak older than T fails over on the timer", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(5), rep(0, refused), Primary, 0, n, sec(35), ReasonNone},
			{sec(34), tick(), Primary, 0, n, sec(35), ReasonNone},
			{sec(35), tick(), Failover, 0, 1, noWake, ReasonStreakTimeout},
		}},
		{"low traffic: a failure after T fails over at once", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(5), rep(0, refused), Primary, 0, n, sec(35), ReasonNone},
			{sec(40), rep(0, refused), Failover, 0, 1, noWake, ReasonStreakTimeout},
		}},
		{"canaries walk the backup list in order", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), rep(0, refused), Failover, 0, n, noWake, ReasonNone}, // still probing
			{sec(3), can(1, timeout), Failover, 0, 2, noWake, ReasonNone},
			{sec(4), can(2, ok), Backup, 2, n, sec(14), ReasonCanarySuccess},
		}},
		{"a failed round waits and starts again", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, refused), Failover, 0, n, sec(7), ReasonNone},
			{sec(6), tick(), Failover, 0, n, sec(7), ReasonNone},
			{sec(7), tick(), Failover, 0, 1, noWake, ReasonNone},
			{sec(8), can(1, ok), Backup, 1, n, sec(18), ReasonCanarySuccess},
		}},
		{"failed rounds back off: 5s, 10s, 20s, then the 20s cap; a state change resets", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, timeout), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, timeout), Failover, 0, n, sec(7), ReasonNone}, // +5s
			{sec(7), tick(), Failover, 0, 1, noWake, ReasonNone},
			{sec(8), can(1, timeout), Failover, 0, 2, noWake, ReasonNone},
			{sec(9), can(2, timeout), Failover, 0, n, sec(19), ReasonNone}, // +10s
			{sec(19), tick(), Failover, 0, 1, noWake, ReasonNone},
			{sec(20), can(1, timeout), Failover, 0, 2, noWake, ReasonNone},
			{sec(21), can(2, timeout), Failover, 0, n, sec(41), ReasonNone}, // +20s
			{sec(41), tick(), Failover, 0, 1, noWake, ReasonNone},
			{sec(42), can(1, timeout), Failover, 0, 2, noWake, ReasonNone},
			{sec(43), can(2, timeout), Failover, 0, n, sec(63), ReasonNone}, // cap
			{sec(50), rep(0, ok), Primary, 0, n, noWake, ReasonPrimarySuccess},
			// a new FAILOVER starts again from CanaryRetryInterval
			{sec(60), rep(0, refused), Primary, 0, n, sec(90), ReasonNone},
			{sec(60), rep(0, refused), Primary, 0, n, sec(90), ReasonNone},
			{sec(60), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(61), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(62), can(2, refused), Failover, 0, n, sec(67), ReasonNone}, // +5s again
		}},
		{"backoff resets through BACKUP too", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, refused), Failover, 0, n, sec(7), ReasonNone},
			{sec(7), tick(), Failover, 0, 1, noWake, ReasonNone},
			{sec(8), can(1, ok), Backup, 1, n, sec(18), ReasonCanarySuccess},
			{sec(18), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(19), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
			{sec(20), rep(0, refused), Primary, 0, n, sec(50), ReasonNone},
			{sec(20), rep(0, refused), Primary, 0, n, sec(50), ReasonNone},
			{sec(20), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(21), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(22), can(2, refused), Failover, 0, n, sec(27), ReasonNone},
		}},
		{"a fixed retry interval: CanaryRetryMax equal to it", func(c *Config) { c.CanaryRetryMax = sec(5) }, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, refused), Failover, 0, n, sec(7), ReasonNone},
			{sec(7), tick(), Failover, 0, 1, noWake, ReasonNone},
			{sec(8), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(9), can(2, refused), Failover, 0, n, sec(14), ReasonNone},
		}},
		{"a regular success on primary in FAILOVER returns to PRIMARY", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), rep(0, ok), Primary, 0, n, noWake, ReasonPrimarySuccess},
			{sec(2), can(1, ok), Primary, 0, n, noWake, ReasonNone}, // late canary ignored
		}},
		{"seed race: canary success before the regular success costs one short BACKUP stint", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			// the network returns: the canary to dc2 answers first ...
			{sec(2), can(2, ok), Backup, 2, n, sec(12), ReasonCanarySuccess},
			// ... then the regular request sent to primary: stale, ignored
			{sec(2.1), rep(0, ok), Backup, 2, n, sec(12), ReasonNone},
			// the small first recovery delay ends the stint 10s later
			{sec(12), tick(), Recovery, 2, 0, noWake, ReasonRecoveryTimer},
			{sec(12.1), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"recovery failures grow the delay linearly up to the cap", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{0, can(1, ok), Backup, 1, n, sec(10), ReasonCanarySuccess},
			{sec(10), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(11), can(0, refused), Backup, 1, n, sec(31), ReasonRecoveryFailure}, // +20s
			{sec(31), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(32), can(0, srvError), Backup, 1, n, sec(62), ReasonRecoveryFailure}, // +30s; a 500 is no recovery
			{sec(62), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(63), can(0, refused), Backup, 1, n, sec(103), ReasonRecoveryFailure}, // +40s (cap)
			{sec(103), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(104), can(0, refused), Backup, 1, n, sec(144), ReasonRecoveryFailure}, // cap holds
			{sec(144), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(145), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
			// a new outage soon after: growth continues (5th entry: cap)
			{sec(200), rep(0, refused), Primary, 0, n, sec(230), ReasonNone},
			{sec(200), rep(0, refused), Primary, 0, n, sec(230), ReasonNone},
			{sec(200), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(201), can(1, ok), Backup, 1, n, sec(241), ReasonCanarySuccess},
		}},
		{"decay: long stable PRIMARY stints undo the growth", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{0, can(1, ok), Backup, 1, n, sec(10), ReasonCanarySuccess}, // entry 1: 10s
			{sec(10), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(10), can(0, refused), Backup, 1, n, sec(30), ReasonRecoveryFailure}, // entry 2: 20s
			{sec(30), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(30), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
			// 30 minutes on primary: less than one decay period, entry 3: 30s
			{sec(1830), rep(0, refused), Primary, 0, n, sec(1860), ReasonNone},
			{sec(1830), rep(0, refused), Primary, 0, n, sec(1860), ReasonNone},
			{sec(1830), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1830), can(1, ok), Backup, 1, n, sec(1860), ReasonCanarySuccess},
			{sec(1860), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(1860), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
			// two hours on primary remove two steps: entry counts as 2 (20s)
			{sec(1860 + 7200), rep(0, refused), Primary, 0, n, sec(1860 + 7230), ReasonNone},
			{sec(1860 + 7200), rep(0, refused), Primary, 0, n, sec(1860 + 7230), ReasonNone},
			{sec(1860 + 7200), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1860 + 7200), can(1, ok), Backup, 1, n, sec(1860 + 7220), ReasonCanarySuccess},
			{sec(1860 + 7220), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(1860 + 7220), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
			// a week later: fully decayed, back to the first delay (10s)
			{sec(1860 + 7220 + 7*86400), rep(0, refused), Primary, 0, n, sec(1860 + 7250 + 7*86400), ReasonNone},
			{sec(1860 + 7220 + 7*86400), rep(0, refused), Primary, 0, n, sec(1860 + 7250 + 7*86400), ReasonNone},
			{sec(1860 + 7220 + 7*86400), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1860 + 7220 + 7*86400), can(1, ok), Backup, 1, n, sec(1860 + 7230 + 7*86400), ReasonCanarySuccess},
		}},
		{"NetworkChanged resets the streak in PRIMARY", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(2), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(3), netChanged(), Primary, 0, n, noWake, ReasonNone},
			{sec(4), rep(0, refused), Primary, 0, n, sec(34), ReasonNone},
			{sec(5), rep(0, refused), Primary, 0, n, sec(34), ReasonNone},
		}},
		{"NetworkChanged ends FAILOVER", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), netChanged(), Primary, 0, n, noWake, ReasonNetworkChanged},
			{sec(2), can(1, ok), Primary, 0, n, noWake, ReasonNone},
		}},
		{"NetworkChanged in BACKUP probes primary early", nil, []step{
			{0, start(1), Backup, 1, n, sec(10), ReasonRestored},
			{sec(2), netChanged(), Recovery, 1, 0, noWake, ReasonNetworkChanged},
			{sec(2), netChanged(), Recovery, 1, n, noWake, ReasonNone},
			{sec(3), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"device offline: every canary fails, stay on primary", func(c *Config) { c.DeviceOfflineCheck = true }, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, dnsFail), Failover, 0, 0, noWake, ReasonNone},
			{sec(3), can(0, timeout), Primary, 0, n, noWake, ReasonDeviceOffline},
			{sec(4), rep(0, refused), Primary, 0, n, sec(34), ReasonNone}, // a fresh streak
		}},
		{"device offline check: primary answers its canary", func(c *Config) { c.DeviceOfflineCheck = true }, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, refused), Failover, 0, 0, noWake, ReasonNone},
			{sec(3), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"confirm primary: the seed's race ends on PRIMARY, no BACKUP stint", confirm, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			// the network returns: dc2 answers first; primary is asked too
			{sec(2), can(2, ok), Failover, 0, 0, noWake, ReasonNone},
			{sec(2.1), can(0, ok), Primary, 0, n, noWake, ReasonPrimaryConfirmed},
			// the regular request arrives later: nothing more to do
			{sec(2.2), rep(0, ok), Primary, 0, n, noWake, ReasonNone},
		}},
		{"confirm primary: a real outage enters BACKUP one primary canary later", confirm, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, ok), Failover, 0, 0, noWake, ReasonNone},
			{sec(1.1), rep(0, refused), Failover, 0, n, noWake, ReasonNone}, // still probing
			// the recovery delay counts from the entry into BACKUP
			{sec(1.2), can(0, refused), Backup, 1, n, sec(11.2), ReasonCanarySuccess},
			{sec(11.2), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(12), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"confirm primary: a primary answering 503 is not trusted", confirm, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, ok), Failover, 0, 0, noWake, ReasonNone},
			{sec(3), can(0, srvError), Backup, 2, n, sec(13), ReasonCanarySuccess},
		}},
		{"confirm primary: a regular success while confirming wins", confirm, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, ok), Failover, 0, 0, noWake, ReasonNone},
			{sec(1.5), rep(0, ok), Primary, 0, n, noWake, ReasonPrimarySuccess},
			{sec(2), can(0, refused), Primary, 0, n, noWake, ReasonNone}, // late: ignored
			// a new outage: the held backup was forgotten, the walk restarts
			{sec(3), rep(0, refused), Primary, 0, n, sec(33), ReasonNone},
			{sec(3), rep(0, refused), Primary, 0, n, sec(33), ReasonNone},
			{sec(3), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(4), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(5), can(2, ok), Failover, 0, 0, noWake, ReasonNone},
			{sec(6), can(0, timeout), Backup, 2, n, sec(16), ReasonCanarySuccess},
		}},
		{"confirm primary: NetworkChanged while confirming", confirm, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, ok), Failover, 0, 0, noWake, ReasonNone},
			{sec(2), netChanged(), Primary, 0, n, noWake, ReasonNetworkChanged},
			{sec(3), can(0, refused), Primary, 0, n, noWake, ReasonNone},
		}},
		{"confirm primary with the offline check: an offline round still ends on PRIMARY", func(c *Config) {
			c.ConfirmPrimary, c.DeviceOfflineCheck = true, true
		}, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, dnsFail), Failover, 0, 0, noWake, ReasonNone},
			{sec(3), can(0, timeout), Primary, 0, n, noWake, ReasonDeviceOffline},
		}},
		{"confirm primary does not change RECOVERY", confirm, []step{
			{0, start(1), Backup, 1, n, sec(10), ReasonRestored},
			{sec(10), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(11), can(0, refused), Backup, 1, n, sec(31), ReasonRecoveryFailure},
			{sec(31), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(32), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"restored start in BACKUP still probes primary on its timer", nil, []step{
			{0, start(2), Backup, 2, n, sec(10), ReasonRestored},
			{sec(10), tick(), Recovery, 2, 0, noWake, ReasonRecoveryTimer},
			{sec(11), can(0, refused), Backup, 2, n, sec(31), ReasonRecoveryFailure},
			{sec(31), tick(), Recovery, 2, 0, noWake, ReasonRecoveryTimer},
			{sec(32), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"an out-of-range restored index starts in PRIMARY", nil, []step{
			{0, start(3), Primary, 0, n, noWake, ReasonNone},
			{0, start(-1), Primary, 0, n, noWake, ReasonNone},
		}},
		{"a failing backup: probe primary, then the other backups", nil, []step{
			{0, start(1), Backup, 1, n, sec(10), ReasonRestored},
			{sec(1), rep(0, refused), Backup, 1, n, sec(10), ReasonNone}, // stale: sent to primary
			{sec(1), rep(1, refused), Backup, 1, n, sec(10), ReasonNone},
			{sec(2), rep(1, refused), Backup, 1, n, sec(10), ReasonNone},
			{sec(3), rep(1, refused), Recovery, 1, 0, noWake, ReasonFailures},
			{sec(4), can(0, refused), Recovery, 1, 2, noWake, ReasonNone},
			{sec(5), can(2, ok), Backup, 2, n, sec(25), ReasonCanarySuccess},
		}},
		{"a failing backup and nothing else answers: stay put", nil, []step{
			{0, start(1), Backup, 1, n, sec(10), ReasonRestored},
			{sec(1), rep(1, refused), Backup, 1, n, sec(10), ReasonNone},
			{sec(2), rep(1, refused), Backup, 1, n, sec(10), ReasonNone},
			{sec(3), rep(1, refused), Recovery, 1, 0, noWake, ReasonFailures},
			{sec(4), can(0, refused), Recovery, 1, 2, noWake, ReasonNone},
			{sec(5), can(2, refused), Backup, 1, n, sec(25), ReasonRecoveryFailure},
		}},
		{"a slow backup streak in BACKUP probes on the T timer", func(c *Config) { c.RecoveryTimeout = sec(60); c.RecoveryTimeoutMax = sec(60) }, []step{
			{0, start(1), Backup, 1, n, sec(60), ReasonRestored},
			{sec(1), rep(1, refused), Backup, 1, n, sec(31), ReasonNone},
			{sec(31), tick(), Recovery, 1, 0, noWake, ReasonStreakTimeout},
		}},
		{"canary results nobody waits for are ignored", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, can(1, ok), Primary, 0, n, noWake, ReasonNone},
			{0, can(0, ok), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{0, can(2, ok), Failover, 0, n, noWake, ReasonNone},
			{0, can(None, ok), Failover, 0, n, noWake, ReasonNone},
			{0, can(1, ok), Backup, 1, n, sec(10), ReasonCanarySuccess},
		}},
		{"Start resets a used policy", nil, []step{
			{0, start(1), Backup, 1, n, sec(10), ReasonRestored},
			{sec(1), rep(1, refused), Backup, 1, n, sec(10), ReasonNone},
			{sec(2), start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(3), rep(0, refused), Primary, 0, n, sec(33), ReasonNone},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			p, err := NewUber(cfg)
			if err != nil {
				t.Fatal(err)
			}
			runSteps(t, p, tc.steps)
		})
	}
}

func TestUberDefaults(t *testing.T) {
	p, err := NewUber(Config{Primary: "a.example", Backups: []string{"b.example"}})
	if err != nil {
		t.Fatal(err)
	}
	n := None
	runSteps(t, p, []step{
		{0, start(n), Primary, 0, n, noWake, ReasonNone},
		{0, rep(0, refused), Primary, 0, n, DefaultFailureTimeout, ReasonNone},
		{0, rep(0, refused), Primary, 0, n, DefaultFailureTimeout, ReasonNone},
		{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
		{0, can(1, refused), Failover, 0, n, DefaultCanaryRetryInterval, ReasonNone},
		{DefaultCanaryRetryInterval, tick(), Failover, 0, 1, noWake, ReasonNone},
		{DefaultCanaryRetryInterval, can(1, ok), Backup, 1, n, DefaultCanaryRetryInterval + DefaultRecoveryTimeout, ReasonCanarySuccess},
	})
	if got, want := p.RecoveryAt(), t0.Add(DefaultCanaryRetryInterval+DefaultRecoveryTimeout); !got.Equal(want) {
		t.Fatalf("RecoveryAt %v, want %v", got, want)
	}
}

func TestRecoveryDelayCap(t *testing.T) {
	cfg := testConfig()
	cfg.RecoveryTimeout, cfg.RecoveryTimeoutStep, cfg.RecoveryTimeoutMax = sec(10), sec(15), sec(50)
	u, err := NewUber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range []time.Duration{sec(10), sec(10), sec(25), sec(40), sec(50), sec(50), sec(50)} {
		if got := u.recoveryDelay(k); got != want {
			t.Errorf("recoveryDelay(%d) = %v, want %v", k, got, want)
		}
	}
	if got := u.recoveryDelay(1 << 40); got != sec(50) {
		t.Errorf("recoveryDelay(huge) = %v, want the cap", got)
	}
}

func TestRetryDelay(t *testing.T) {
	for _, c := range []struct {
		interval, max time.Duration
		want          []time.Duration
	}{
		{sec(5), sec(30), []time.Duration{sec(5), sec(10), sec(20), sec(30), sec(30)}},
		{sec(5), sec(5), []time.Duration{sec(5), sec(5), sec(5)}},
		{sec(3), sec(7), []time.Duration{sec(3), sec(6), sec(7), sec(7)}},
		{1 << 62, 1<<63 - 1, []time.Duration{1 << 62, 1<<63 - 1, 1<<63 - 1}},
	} {
		cfg := testConfig()
		cfg.CanaryRetryInterval, cfg.CanaryRetryMax = c.interval, c.max
		u, err := NewUber(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range c.want {
			if got := u.retryDelay(k); got != want {
				t.Errorf("%v..%v: retryDelay(%d) = %v, want %v", c.interval, c.max, k, got, want)
			}
		}
		if got := u.retryDelay(1 << 40); got != c.max {
			t.Errorf("%v..%v: retryDelay(huge) = %v, want the cap", c.interval, c.max, got)
		}
	}
}

// TestReportDoesNotAllocate: the simulator calls Report millions of times.
func TestReportDoesNotAllocate(t *testing.T) {
	for name, mk := range policies() {
		t.Run(name, func(t *testing.T) {
			p := mk(t)
			now := t0
			p.Start(now, None)
			kinds := []outcome.Kind{ok, refused, ok, refused, refused, srvError, refused, refused, refused}
			i := 0
			allocs := testing.AllocsPerRun(1000, func() {
				now = now.Add(time.Millisecond)
				a := p.Report(now, p.Domain(), outcome.Of(kinds[i%len(kinds)]))
				if a.Canary != None {
					p.CanaryDone(now, a.Canary, outcome.Of(ok))
				}
				p.Tick(now)
				i++
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per Report, want 0", allocs)
			}
		})
	}
}

func policies() map[string]func(testing.TB) Policy {
	return map[string]func(testing.TB) Policy{
		"uber": func(tb testing.TB) Policy {
			p, err := NewUber(testConfig())
			if err != nil {
				tb.Fatal(err)
			}
			return p
		},
		"round_robin": func(tb testing.TB) Policy {
			p, err := NewRoundRobin(testConfig())
			if err != nil {
				tb.Fatal(err)
			}
			return p
		},
		"uber_confirm": func(tb testing.TB) Policy {
			cfg := testConfig()
			cfg.ConfirmPrimary = true
			p, err := NewUber(cfg)
			if err != nil {
				tb.Fatal(err)
			}
			return p
		},
		"threshold": func(tb testing.TB) Policy {
			p, err := NewThreshold(testConfig())
			if err != nil {
				tb.Fatal(err)
			}
			return p
		},
	}
}

func BenchmarkPolicyReport(b *testing.B) {
	for _, name := range []string{"uber", "round_robin", "threshold"} {
		b.Run(name, func(b *testing.B) {
			p := policies()[name](b)
			now := t0
			p.Start(now, None)
			kinds := [8]outcome.Kind{ok, ok, ok, ok, ok, ok, ok, refused}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				now = now.Add(time.Millisecond)
				a := p.Report(now, p.Domain(), outcome.Of(kinds[i&7]))
				if a.Canary != None {
					p.CanaryDone(now, a.Canary, outcome.Of(ok))
				}
			}
		})
	}
}

func BenchmarkNewUber(b *testing.B) {
	cfg := testConfig()
	b.ReportAllocs()
	for b.Loop() {
		p, err := NewUber(cfg)
		if err != nil {
			b.Fatal(err)
		}
		p.Start(t0, None)
	}
}
