package failover

import (
	"time"

	"github.com/veerhq/veer/outcome"
)

// RoundRobin is the first baseline of seed 000: every network failure of a
// regular request moves traffic to the next domain in the list (primary,
// backup 1, ..., backup n, primary, ...), and traffic stays there until the
// next failure. It sends no canaries and never wakes up.
type RoundRobin struct{ baseline }

// Threshold is the second baseline of seed 000: FailureThreshold consecutive
// network failures of regular requests move traffic to the next domain in the
// list, where it stays until the next run of failures. A success resets the
// count. It sends no canaries and never wakes up.
type Threshold struct{ baseline }

var (
	_ Policy = (*RoundRobin)(nil)
	_ Policy = (*Threshold)(nil)
)

// NewRoundRobin returns the round-robin baseline for cfg.
func NewRoundRobin(cfg Config) (*RoundRobin, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &RoundRobin{baseline{n: len(cfg.Backups), threshold: 1, fail: newStatusSet(cfg.FailureStatuses)}}, nil
}

// NewThreshold returns the threshold baseline for cfg: it switches after
// cfg.FailureThreshold (default 3) consecutive network failures.
func NewThreshold(cfg Config) (*Threshold, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Threshold{baseline{n: len(cfg.Backups), threshold: cfg.withDefaults().FailureThreshold, fail: newStatusSet(cfg.FailureStatuses)}}, nil
}

// baseline switches to the next domain after `threshold` consecutive network
// failures on the current one. Outcomes are counted as in Uber: only for the
// current domain, network kinds (and Config.FailureStatuses) are failures,
// ClientCanceled is ignored, anything else resets the count.
type baseline struct {
	n, threshold int
	fail         statusSet
	domain       int
	failures     int
}

// Start implements Policy; a restored backup index in 1..n starts there.
// It resets all state, so one value can serve many sessions in turn.
func (b *baseline) Start(now time.Time, restored int) Action {
	b.domain, b.failures = PrimaryIndex, 0
	if restored >= 1 && restored <= b.n {
		b.domain = restored
		return Action{Canary: None, Transition: Transition{From: Primary, To: Backup, Reason: ReasonRestored, Domain: restored}}
	}
	return Action{Canary: None}
}

// Domain implements Policy.
func (b *baseline) Domain() int { return b.domain }

// State implements Policy: Primary on the primary domain, Backup elsewhere.
func (b *baseline) State() State { return stateOf(b.domain) }

func stateOf(domain int) State {
	if domain == PrimaryIndex {
		return Primary
	}
	return Backup
}

// Report implements Policy. A switch is reported as a Transition with reason
// baseline_switch; moving from one backup to the next has From == To ==
// Backup.
func (b *baseline) Report(now time.Time, domain int, o outcome.Outcome) Action {
	if domain != b.domain || o.Kind == outcome.ClientCanceled {
		return Action{Canary: None}
	}
	if !b.fail.failure(o) {
		b.failures = 0
		return Action{Canary: None}
	}
	b.failures++
	if b.failures < b.threshold {
		return Action{Canary: None}
	}
	from := b.State()
	b.failures = 0
	b.domain++
	if b.domain > b.n {
		b.domain = PrimaryIndex
	}
	return Action{Canary: None, Transition: Transition{From: from, To: b.State(), Reason: ReasonBaselineSwitch, Domain: b.domain}}
}

// CanaryDone implements Policy; baselines send no canaries.
func (b *baseline) CanaryDone(now time.Time, domain int, o outcome.Outcome) Action {
	return Action{Canary: None}
}

// Tick implements Policy; baselines never ask to wake up.
func (b *baseline) Tick(now time.Time) Action { return Action{Canary: None} }

// NetworkChanged implements Policy: it resets the failure count.
func (b *baseline) NetworkChanged(now time.Time) Action {
	b.failures = 0
	return Action{Canary: None}
}

func (b *baseline) successIsNoop() bool { return b.failures == 0 }
