package failover

import (
	"testing"

	"github.com/veerhq/veer/outcome"
)

func TestRoundRobinSteps(t *testing.T) {
	n := None
	p, err := NewRoundRobin(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, p, []step{
		{0, start(n), Primary, 0, n, noWake, ReasonNone},
		{sec(1), rep(0, ok), Primary, 0, n, noWake, ReasonNone},
		{sec(1), rep(0, srvError), Primary, 0, n, noWake, ReasonNone},
		{sec(1), rep(0, outcome.ClientCanceled), Primary, 0, n, noWake, ReasonNone},
		{sec(2), rep(0, refused), Backup, 1, n, noWake, ReasonBaselineSwitch},
		{sec(2), rep(0, refused), Backup, 1, n, noWake, ReasonNone}, // stale
		{sec(3), rep(1, ok), Backup, 1, n, noWake, ReasonNone},
		{sec(4), rep(1, dnsFail), Backup, 2, n, noWake, ReasonBaselineSwitch}, // backup -> backup
		{sec(5), tick(), Backup, 2, n, noWake, ReasonNone},
		{sec(5), can(0, ok), Backup, 2, n, noWake, ReasonNone},
		{sec(5), netChanged(), Backup, 2, n, noWake, ReasonNone},
		{sec(6), rep(2, timeout), Primary, 0, n, noWake, ReasonBaselineSwitch}, // wraps
		{sec(7), start(2), Backup, 2, n, noWake, ReasonRestored},
	})
}

func TestThresholdSteps(t *testing.T) {
	n := None
	p, err := NewThreshold(testConfig()) // switches after 3
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, p, []step{
		{0, start(n), Primary, 0, n, noWake, ReasonNone},
		{sec(1), rep(0, refused), Primary, 0, n, noWake, ReasonNone},
		{sec(2), rep(0, refused), Primary, 0, n, noWake, ReasonNone},
		{sec(3), rep(0, ok), Primary, 0, n, noWake, ReasonNone}, // resets
		{sec(4), rep(0, refused), Primary, 0, n, noWake, ReasonNone},
		{sec(5), rep(0, refused), Primary, 0, n, noWake, ReasonNone},
		{sec(6), netChanged(), Primary, 0, n, noWake, ReasonNone}, // resets
		{sec(7), rep(0, refused), Primary, 0, n, noWake, ReasonNone},
		{sec(8), rep(0, refused), Primary, 0, n, noWake, ReasonNone},
		{sec(9), rep(0, srvError), Primary, 0, n, noWake, ReasonNone}, // reachable: resets
		{sec(10), rep(0, refused), Primary, 0, n, noWake, ReasonNone},
		{sec(11), rep(0, refused), Primary, 0, n, noWake, ReasonNone},
		{sec(11), rep(0, outcome.ClientCanceled), Primary, 0, n, noWake, ReasonNone}, // ignored
		{sec(12), rep(0, refused), Backup, 1, n, noWake, ReasonBaselineSwitch},
		{sec(13), rep(1, refused), Backup, 1, n, noWake, ReasonNone},
		{sec(14), rep(1, refused), Backup, 1, n, noWake, ReasonNone},
		{sec(15), rep(1, refused), Backup, 2, n, noWake, ReasonBaselineSwitch},
		{sec(16), rep(2, refused), Backup, 2, n, noWake, ReasonNone},
		{sec(16), rep(2, refused), Backup, 2, n, noWake, ReasonNone},
		{sec(16), rep(2, refused), Primary, 0, n, noWake, ReasonBaselineSwitch},
	})
}
