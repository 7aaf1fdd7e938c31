package failover

import (
	"net"
	"net/url"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/veerhq/veer/outcome"
)

// TestFailureStatusSteps: listed statuses count as failures of the domain,
// as network errors do; unlisted ones still prove it reachable.
func TestFailureStatusSteps(t *testing.T) {
	cfg := testConfig()
	cfg.FailureStatuses = []int{502, 504}
	u, err := NewUber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, u, []step{
		{0, start(None), Primary, 0, None, noWake, ReasonNone},
		{sec(1), status(0, 502), Primary, 0, None, sec(31), ReasonNone},
		{sec(2), status(0, 500), Primary, 0, None, noWake, ReasonNone}, // not listed: a success
		{sec(3), status(0, 504), Primary, 0, None, sec(33), ReasonNone},
		{sec(4), rep(0, outcome.ConnectRefused), Primary, 0, None, sec(33), ReasonNone},
		{sec(5), status(0, 502), Failover, 0, 1, noWake, ReasonFailures},
		{sec(5.5), status(0, 200), Primary, 0, None, noWake, ReasonPrimarySuccess},
		{sec(6), status(0, 502), Primary, 0, None, sec(36), ReasonNone},
		{sec(7), status(0, 502), Primary, 0, None, sec(36), ReasonNone},
		{sec(8), status(0, 502), Failover, 0, 1, noWake, ReasonFailures},
		{sec(8.1), can(1, outcome.Success), Backup, 1, None, sec(18.1), ReasonCanarySuccess},
		{sec(9), status(1, 504), Backup, 1, None, sec(18.1), ReasonNone}, // the backup's own streak
		{sec(18.1), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
		{sec(18.2), can(0, outcome.ServerError), Backup, 1, None, sec(38.2), ReasonRecoveryFailure},
	})

	// Without the list a 502 is a success, as the seed says.
	u, _ = NewUber(testConfig())
	steps := []step{{0, start(None), Primary, 0, None, noWake, ReasonNone}}
	for i := range 5 {
		steps = append(steps, step{sec(float64(i + 1)), status(0, 502), Primary, 0, None, noWake, ReasonNone})
	}
	runSteps(t, u, steps)

	// The threshold baseline counts them too.
	th, _ := NewThreshold(cfg)
	runSteps(t, th, []step{
		{0, start(None), Primary, 0, None, noWake, ReasonNone},
		{sec(1), status(0, 502), Primary, 0, None, noWake, ReasonNone},
		{sec(2), status(0, 504), Primary, 0, None, noWake, ReasonNone},
		{sec(3), status(0, 502), Backup, 1, None, noWake, ReasonBaselineSwitch},
	})
}

// TestVeerHistorySteps: the veer policy remembers that the primary failed on
// a network and, on coming back to that network (a network change or a new
// launch), starts FAILOVER at once instead of spending X failures there.
func TestVeerHistorySteps(t *testing.T) {
	u, err := NewVeer(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, u, []step{
		{0, start(None), Primary, 0, None, noWake, ReasonNone},
		{0, network("lte/C4"), Primary, 0, None, noWake, ReasonNone}, // nothing known
		// Silence (a timeout) needs X = 3 failures ...
		{sec(2), rep(0, outcome.ResponseTimeout), Primary, 0, None, sec(32), ReasonNone},
		// An answer (the resolver's SERVFAIL) starts FAILOVER at once.
		{sec(3), rep(0, outcome.DNSServerFailure), Failover, 0, 1, noWake, ReasonAnsweredFailure},
		// The backup answers in 0.1 s: the primary gets max(2 x 0.1 s, 1 s).
		{sec(3.1), can(1, outcome.Success), Failover, 0, 0, sec(3.1) + time.Second, ReasonNone},
		{sec(3.2), can(0, outcome.DNSServerFailure), Backup, 1, None, sec(13.2), ReasonCanarySuccess},
		// Wi-Fi: nothing known there; the seed's early probe finds primary fine.
		{sec(5), network("wifi/home"), Recovery, 1, 0, noWake, ReasonNetworkChanged},
		{sec(5.1), can(0, outcome.Success), Primary, 0, None, noWake, ReasonRecoverySuccess},
		// Back on C4's LTE a minute later: FAILOVER at once.
		{sec(60), network("lte/C4"), Failover, 0, 1, noWake, ReasonHistory},
		{sec(60.1), can(1, outcome.Success), Failover, 0, 0, sec(60.1) + time.Second, ReasonNone},
		{sec(60.2), can(0, outcome.DNSServerFailure), Backup, 1, None, sec(80.2), ReasonCanarySuccess},
		// In BACKUP a change to a suspect network keeps the backup (no early probe).
		{sec(70), network("wifi/home"), Recovery, 1, 0, noWake, ReasonNetworkChanged},
		{sec(70.1), can(0, outcome.Success), Primary, 0, None, noWake, ReasonRecoverySuccess},
		{sec(75), rep(0, outcome.ResponseTimeout), Primary, 0, None, sec(105), ReasonNone},
		{sec(76), network("lte/C4"), Failover, 0, 1, noWake, ReasonHistory},
		{sec(76.1), can(1, outcome.Success), Failover, 0, 0, sec(76.1) + time.Second, ReasonNone},
		// This time the primary answers: the memory of C4 is dropped.
		{sec(76.2), can(0, outcome.Success), Primary, 0, None, noWake, ReasonPrimaryConfirmed},
		{sec(80), network("wifi/home"), Primary, 0, None, noWake, ReasonNone},
		{sec(81), network("lte/C4"), Primary, 0, None, noWake, ReasonNone},
	})
	if got := u.Memory(); len(got) != 0 {
		t.Fatalf("memory after the primary answered on lte/C4: %v, want none", got)
	}
}

// TestVeerHistoryLaunchAndExpiry: the memory survives Start (a new launch
// starts FAILOVER on a suspect network, and BACKUP restored from the store
// stays there), and expires after HistoryTTL.
func TestVeerHistoryLaunchAndExpiry(t *testing.T) {
	cfg := testConfig()
	cfg.HistoryTTL = time.Hour
	u, _ := NewVeer(cfg)
	u.Remember([]NetworkFailure{{"lte/C4", t0}})
	runSteps(t, u, []step{
		{sec(10), start(None), Primary, 0, None, noWake, ReasonNone},
		{sec(10), network("lte/C4"), Failover, 0, 1, noWake, ReasonHistory},
	})
	u.Start(t0.Add(sec(20)), None) // Start reports a restore as from PRIMARY
	runSteps(t, u, []step{
		{sec(20), start(1), Backup, 1, None, sec(30), ReasonRestored},
		{sec(20), network("lte/C4"), Backup, 1, None, sec(30), ReasonNone},
	})
	runSteps(t, u, []step{
		{time.Hour, start(None), Primary, 0, None, noWake, ReasonNone},
		{time.Hour, network("lte/C4"), Primary, 0, None, noWake, ReasonNone}, // expired
	})
	// The uber policy keeps no memory.
	ub, _ := NewUber(cfg)
	ub.Remember([]NetworkFailure{{"lte/C4", t0}})
	runSteps(t, ub, []step{
		{sec(10), start(None), Primary, 0, None, noWake, ReasonNone},
		{sec(10), network("lte/C4"), Primary, 0, None, noWake, ReasonNone},
	})
}

// TestVeerHistoryBounded: HistorySize keeps the most recent networks, and a
// network recorded again moves to the end.
func TestVeerHistoryBounded(t *testing.T) {
	cfg := testConfig()
	cfg.HistorySize = 2
	u, _ := NewVeer(cfg)
	u.Start(t0, None)
	fail := func(at time.Duration, n string) {
		now := t0.Add(at)
		u.SetNetwork(now, n)
		for range 3 {
			u.Report(now, 0, outcome.Of(outcome.ConnectRefused))
		}
		u.CanaryDone(now, 1, outcome.Of(outcome.Success))
		u.CanaryDone(now, 0, outcome.Of(outcome.ConnectRefused))
		if u.State() != Backup {
			t.Fatalf("%s: state %v, want backup", n, u.State())
		}
		u.Start(now, None) // a relaunch on primary
	}
	gen := u.MemoryGen()
	fail(sec(1), "a")
	fail(sec(2), "b")
	fail(sec(3), "a")
	fail(sec(4), "c")
	want := []NetworkFailure{{"a", t0.Add(sec(3))}, {"c", t0.Add(sec(4))}}
	if got := u.Memory(); !slices.Equal(got, want) {
		t.Fatalf("memory %v, want %v", got, want)
	}
	if u.MemoryGen() == gen {
		t.Fatal("MemoryGen did not change")
	}
	u.Remember([]NetworkFailure{{"x", t0}, {"y", t0}, {"z", t0}})
	if got := u.Memory(); len(got) != 2 || got[0].Network != "y" {
		t.Fatalf("Remember kept %v, want the 2 most recent", got)
	}
}

// TestVeerConfirmDeadline: the primary's confirming canary counts as failed
// when it has not answered within twice the backup's answer time (at least
// 1 s, at most CanaryTimeout); its late answer is ignored. The uber policy
// with ConfirmPrimary waits for the canary itself.
func TestVeerConfirmDeadline(t *testing.T) {
	u, _ := NewVeer(testConfig())
	runSteps(t, u, []step{
		{0, start(None), Primary, 0, None, noWake, ReasonNone},
		{sec(1), rep(0, outcome.ConnectTimeout), Primary, 0, None, sec(31), ReasonNone},
		{sec(2), rep(0, outcome.ConnectTimeout), Primary, 0, None, sec(31), ReasonNone},
		{sec(3), rep(0, outcome.ConnectTimeout), Failover, 0, 1, noWake, ReasonFailures},
		{sec(3.8), can(1, outcome.Success), Failover, 0, 0, sec(3.8) + 2*(sec(3.8)-sec(3)), ReasonNone}, // 2 x 0.8 s
		{sec(5.4), tick(), Backup, 1, None, sec(15.4), ReasonCanarySuccess},
		{sec(6), can(0, outcome.Success), Backup, 1, None, sec(15.4), ReasonNone}, // too late
	})
	u, _ = NewVeer(testConfig())
	runSteps(t, u, []step{
		{0, start(None), Primary, 0, None, noWake, ReasonNone},
		{sec(1), rep(0, outcome.ConnectRefused), Failover, 0, 1, noWake, ReasonAnsweredFailure},
		{sec(2.9), can(1, outcome.Success), Failover, 0, 0, sec(2.9) + 3*time.Second, ReasonNone}, // capped at 3 s
		{sec(4), can(0, outcome.Success), Primary, 0, None, noWake, ReasonPrimaryConfirmed},
	})
	cfg := testConfig()
	cfg.ConfirmPrimary = true
	ub, _ := NewUber(cfg)
	runSteps(t, ub, []step{
		{0, start(None), Primary, 0, None, noWake, ReasonNone},
		{sec(1), rep(0, outcome.ConnectRefused), Primary, 0, None, sec(31), ReasonNone}, // uber: X = 3
		{sec(2), rep(0, outcome.ConnectRefused), Primary, 0, None, sec(31), ReasonNone},
		{sec(3), rep(0, outcome.ConnectRefused), Failover, 0, 1, noWake, ReasonFailures},
		{sec(3.8), can(1, outcome.Success), Failover, 0, 0, noWake, ReasonNone},
	})
}

// TestVeerNoRouteIsNotAnAnswer: "network unreachable" (the device is
// offline) is filed under connect_refused by outcome, but it is silence
// about the primary: it needs X failures like a timeout.
func TestVeerNoRouteIsNotAnAnswer(t *testing.T) {
	u, _ := NewVeer(testConfig())
	u.Start(t0, None)
	for _, errno := range []syscall.Errno{syscall.ENETUNREACH, syscall.EHOSTUNREACH} {
		err := &url.Error{Op: "Get", URL: "https://api.example.com/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}}
		o := outcome.Outcome{Kind: outcome.ClassifyError(err), Err: err}
		if o.Kind != outcome.ConnectRefused {
			t.Fatalf("%v classified %v, want connect_refused", errno, o.Kind)
		}
		if a := u.Report(t0, 0, o); u.State() != Primary || a.Transition.Changed() {
			t.Fatalf("%v: %v after one failure, want primary", errno, u.State())
		}
		u.Start(t0, None)
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	if u.Report(t0, 0, outcome.Outcome{Kind: outcome.ClassifyError(refused), Err: refused}); u.State() != Failover {
		t.Fatalf("a refusal left the policy in %v, want failover", u.State())
	}
}
