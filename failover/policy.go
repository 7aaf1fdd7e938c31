package failover

import (
	"time"

	"github.com/veerhq/veer/outcome"
)

// Domains are named by index in a policy: 0 is the primary, 1..n the
// backups in configured order. The Transport maps indices to host names.
const (
	PrimaryIndex = 0
	// None means "no domain" in an Action (no canary to send).
	None = -1
)

// Policy is the pure decision core of client domain failover: a state
// machine fed with (time, domain, outcome) that tells its shell which domain
// regular traffic uses, which canary to send and when to wake it up.
//
// Contract: a Policy never reads a clock, starts a goroutine, sleeps or does
// I/O; every method takes the current time and returns at once. Methods are
// not safe for concurrent use: the shell serialises calls (the Transport with
// a mutex, the simulator by running on one goroutine). Outcomes that do not
// say the domain could not serve (outcome.Kind.Unreachable() == false: a
// network failure, or a gateway's UpstreamUnavailable) never count as
// failures, unless Config.FailureStatuses lists their status. The same Policy values drive the real Transport and the
// simulator.
type Policy interface {
	// Start initialises the policy at now. restored is the backup domain
	// index persisted by a previous run (the seed's "app launch" in BACKUP),
	// or None.
	Start(now time.Time, restored int) Action
	// Domain is the index of the domain regular traffic uses now.
	Domain() int
	// State is the current state (baselines report Primary or Backup).
	State() State
	// Report feeds the outcome of a regular request sent to domain.
	Report(now time.Time, domain int, o outcome.Outcome) Action
	// CanaryDone feeds the outcome of the canary sent to domain. The shell
	// answers every requested canary with exactly one CanaryDone (a timeout
	// is a failure); a request for a domain whose canary is still in flight
	// may be folded into that one.
	CanaryDone(now time.Time, domain int, o outcome.Outcome) Action
	// Tick is called by the shell at (or after) the last Action's Wake.
	Tick(now time.Time) Action
	// NetworkChanged tells the policy that the device changed network
	// (Wi-Fi to cellular, say).
	NetworkChanged(now time.Time) Action
}

// Action is what a Policy asks its shell to do after a call.
type Action struct {
	// Canary is the domain index to send one canary to now, or None.
	Canary int
	// Wake is when the shell must call Tick; the zero time means no wake-up
	// is needed. A later Action's Wake replaces an earlier one.
	Wake time.Time
	// Transition is the state change this call caused; the zero Transition
	// (Reason == ReasonNone) when there was none.
	Transition Transition
}

// Transition describes one state change.
type Transition struct {
	From, To State
	Reason   Reason
	// Domain is the domain index regular traffic uses after the change.
	Domain int
}

// Changed reports whether t records a state change. Every change carries a
// Reason; a baseline moving traffic from one backup to the next is a change
// with From == To == Backup.
func (t Transition) Changed() bool { return t.Reason != ReasonNone }

// State is a state of the failover machine.
type State uint8

// The states of Uber's failover machine (seed 000).
const (
	Primary  State = iota // all traffic to primary
	Failover              // traffic still on primary; canaries probe backups
	Backup                // all traffic to the backup whose canary succeeded
	Recovery              // traffic on backup; a canary probes primary
)

func (s State) String() string {
	switch s {
	case Primary:
		return "primary"
	case Failover:
		return "failover"
	case Backup:
		return "backup"
	case Recovery:
		return "recovery"
	}
	return "unknown"
}

// Reason says why a transition happened.
type Reason uint8

// Reasons for transitions.
const (
	ReasonNone             Reason = iota
	ReasonFailures                // X consecutive network failures within Y
	ReasonStreakTimeout           // a failure streak older than T (low traffic)
	ReasonCanarySuccess           // a backup canary succeeded
	ReasonPrimarySuccess          // a regular request to primary succeeded
	ReasonRecoveryTimer           // the recovery timer expired
	ReasonRecoverySuccess         // the primary canary succeeded
	ReasonRecoveryFailure         // the primary canary failed
	ReasonNetworkChanged          // the app reported a network change
	ReasonRestored                // started in BACKUP from a persisted domain
	ReasonDeviceOffline           // every canary failed: the device is offline
	ReasonBaselineSwitch          // a baseline policy moved to another domain
	ReasonPrimaryConfirmed        // ConfirmPrimary: the primary answered its canary in FAILOVER
	ReasonHistory                 // the primary failed recently on the network the device is on
	ReasonAnsweredFailure         // veer: a failure that is an answer (refused, DNS error, TLS alert)
)

func (r Reason) String() string {
	switch r {
	case ReasonNone:
		return "none"
	case ReasonFailures:
		return "failures"
	case ReasonStreakTimeout:
		return "streak_timeout"
	case ReasonCanarySuccess:
		return "canary_success"
	case ReasonPrimarySuccess:
		return "primary_success"
	case ReasonRecoveryTimer:
		return "recovery_timer"
	case ReasonRecoverySuccess:
		return "recovery_success"
	case ReasonRecoveryFailure:
		return "recovery_failure"
	case ReasonNetworkChanged:
		return "network_changed"
	case ReasonRestored:
		return "restored"
	case ReasonDeviceOffline:
		return "device_offline"
	case ReasonBaselineSwitch:
		return "baseline_switch"
	case ReasonPrimaryConfirmed:
		return "primary_confirmed"
	case ReasonHistory:
		return "history"
	case ReasonAnsweredFailure:
		return "answered_failure"
	}
	return "unknown"
}

// quietPolicy is implemented by the policies of this package: it reports
// whether a successful Report for the current domain would change nothing,
// so that the Transport's request path can skip its lock.
type quietPolicy interface {
	Policy
	successIsNoop() bool
}

// NewPolicy returns the policy cfg.Policy names (default "veer"): the one
// function that maps a Config to its decision core, used by NewTransport and
// by the simulator, so that both run exactly the same policy for the same
// Config.
func NewPolicy(cfg Config) (Policy, error) {
	switch cfg.Policy {
	case PolicyUber:
		return NewUber(cfg)
	case PolicyRoundRobin:
		return NewRoundRobin(cfg)
	case PolicyThreshold:
		return NewThreshold(cfg)
	}
	return NewVeer(cfg)
}

// statusSet is a set of HTTP status codes below 640 (Config.FailureStatuses).
type statusSet [10]uint64

func newStatusSet(codes []int) statusSet {
	var s statusSet
	for _, c := range codes {
		if c >= 0 && c < 640 {
			s[c/64] |= 1 << (c % 64)
		}
	}
	return s
}

func (s *statusSet) has(code int) bool {
	return code >= 0 && code < 640 && s[code/64]&(1<<(code%64)) != 0
}

// failure reports whether a regular request's outcome counts as a failure of
// its domain: a network outcome, a gateway's answer that nothing behind it
// can serve (outcome.UpstreamUnavailable, read from its Veer-Outcome
// header), or a status listed in FailureStatuses. A shed 503, a 429 and an
// application's own 5xx never count by default.
func (s *statusSet) failure(o outcome.Outcome) bool {
	return o.Kind.Unreachable() || o.Status != 0 && o.Kind != outcome.ClientCanceled && s.has(o.Status)
}

var (
	_ quietPolicy = (*Uber)(nil)
	_ quietPolicy = (*RoundRobin)(nil)
	_ quietPolicy = (*Threshold)(nil)
)
