package failover

import (
	"time"

	"github.com/veerhq/veer/outcome"
)

// Uber is the failover state machine of seed 000:
//
//   - PRIMARY: traffic on primary. FailureThreshold (X) consecutive network
//     failures within FailureWindow (Y), or a failure streak that no
//     success broke for FailureTimeout (T), start FAILOVER.
//   - FAILOVER: traffic still on primary; canaries probe the backups in
//     order, one at a time; the first success enters BACKUP on that backup.
//     Any regular success on primary returns to PRIMARY. After a round in
//     which every backup failed, a new round starts CanaryRetryInterval
//     later, doubling after each further failed round up to CanaryRetryMax
//     (beyond the seed; reset by any state change); with DeviceOfflineCheck
//     the primary is probed instead and, when it fails too, the device is
//     deemed offline and the machine returns to PRIMARY (reason
//     device_offline).
//   - BACKUP: traffic on the backup. The recovery timer runs; on expiry,
//     RECOVERY. Its delay is RecoveryTimeout + (k-1)*RecoveryTimeoutStep for
//     the k-th entry into BACKUP, capped at RecoveryTimeoutMax; each full
//     RecoveryDecay spent on primary removes one step.
//   - RECOVERY: traffic stays on the backup; a canary probes primary.
//     Success returns to PRIMARY, failure to BACKUP.
//
// Beyond the seed: with ConfirmPrimary, a backup canary success in FAILOVER
// is not acted on at once: the primary is canaried first, and only if that
// canary fails does the machine enter BACKUP on the backup that answered; if
// it succeeds the machine returns to PRIMARY (reason primary_confirmed).
// NetworkChanged resets failure streaks, returns FAILOVER to PRIMARY (its
// evidence came from the old network) and starts an early
// RECOVERY probe from BACKUP. If the backup itself fails in BACKUP (X within
// Y or T, as on primary), the machine probes the primary and then the other
// backups in order and moves to the first that answers (or stays put when
// none does).
//
// A regular outcome counts only for the domain traffic uses now; outcomes of
// requests sent elsewhere (before a switch) are stale and ignored. Network
// outcomes are failures; any other outcome except ClientCanceled proves the
// domain reachable and counts as a success (a 500 came from a live server);
// ClientCanceled says nothing and is ignored. A canary succeeds only with
// outcome.Success.
//
// The zero Uber is not usable; call NewUber. Not safe for concurrent use
// (see Policy).
type Uber struct {
	n             int // number of backups
	threshold     int
	window        time.Duration
	streakTimeout time.Duration
	rtBase        time.Duration
	rtStep        time.Duration
	rtMax         time.Duration
	decay         time.Duration
	retry         time.Duration
	retryMax      time.Duration
	offlineCheck  bool
	confirm       bool
	fail          statusSet     // Config.FailureStatuses
	fastAnswers   bool          // veer: a failure that is an answer starts FAILOVER (veer.go)
	confirmMin    time.Duration // veer: least wait for the confirming primary canary; 0: CanaryTimeout
	canaryTimeout time.Duration

	// per-network memory (history.go); kept across Start
	useHist bool
	histTTL time.Duration
	histMax int
	hist    []NetworkFailure
	histGen uint64
	network string // the network the device is on, "" if unknown; reset by Start

	state  State
	domain int

	// failure streak on the traffic domain
	streak      int
	streakStart time.Time
	ring        []time.Time // times of the last `threshold` failures, at index i%threshold

	canary    int       // domain whose canary result is awaited, or None
	held      int       // FAILOVER with ConfirmPrimary: the backup that answered while primary is probed, or None
	askedAt   time.Time // when the awaited canary was asked for
	confirmBy time.Time // FAILOVER, held: when an unanswered primary canary counts as failed; zero: never
	sweep     bool      // RECOVERY: probe backups too when primary fails
	roundAt   time.Time // FAILOVER: start of the next canary round; zero if none is due
	rounds    int       // FAILOVER: failed canary rounds since entering it

	entries      int // entries into BACKUP counted by the recovery delay
	recoveryAt   time.Time
	primarySince time.Time // when traffic last came (back) to primary
}

var _ Policy = (*Uber)(nil)

// NewUber returns the Uber policy for cfg (zero fields take their defaults).
// It is cheap (two allocations), so the simulator builds one per session.
func NewUber(cfg Config) (*Uber, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	u := &Uber{
		n:             len(c.Backups),
		threshold:     c.FailureThreshold,
		window:        c.FailureWindow,
		streakTimeout: c.FailureTimeout,
		rtBase:        c.RecoveryTimeout,
		rtStep:        c.RecoveryTimeoutStep,
		rtMax:         c.RecoveryTimeoutMax,
		decay:         c.RecoveryDecay,
		retry:         c.CanaryRetryInterval,
		retryMax:      c.CanaryRetryMax,
		offlineCheck:  c.DeviceOfflineCheck,
		confirm:       c.ConfirmPrimary,
		canaryTimeout: c.CanaryTimeout,
		fail:          newStatusSet(c.FailureStatuses),
		histTTL:       c.HistoryTTL,
		histMax:       c.HistorySize,
		ring:          make([]time.Time, c.FailureThreshold),
		canary:        None,
		held:          None,
	}
	return u, nil
}

// Start implements Policy. A restored backup index in 1..n starts in BACKUP
// on it (reason restored) with the first recovery delay; anything else
// starts in PRIMARY. Start resets every piece of state, recovery growth and
// the current network included, so one Uber can serve many sessions in turn
// without allocating; the per-network memory is the device's and is kept
// (Remember(nil) clears it).
func (u *Uber) Start(now time.Time, restored int) Action {
	ring := u.ring
	clear(ring)
	*u = Uber{
		n: u.n, threshold: u.threshold, window: u.window, streakTimeout: u.streakTimeout,
		rtBase: u.rtBase, rtStep: u.rtStep, rtMax: u.rtMax, decay: u.decay, retry: u.retry, retryMax: u.retryMax,
		offlineCheck: u.offlineCheck, confirm: u.confirm, fail: u.fail, ring: ring,
		fastAnswers: u.fastAnswers, confirmMin: u.confirmMin, canaryTimeout: u.canaryTimeout,
		useHist: u.useHist, histTTL: u.histTTL, histMax: u.histMax, hist: u.hist, histGen: u.histGen,
		state: Primary, domain: PrimaryIndex, canary: None, held: None, primarySince: now,
	}
	if restored >= 1 && restored <= u.n {
		return u.toBackup(now, restored, ReasonRestored)
	}
	return u.idle()
}

// Domain implements Policy.
func (u *Uber) Domain() int { return u.domain }

// State implements Policy.
func (u *Uber) State() State { return u.state }

// Report implements Policy.
func (u *Uber) Report(now time.Time, domain int, o outcome.Outcome) Action {
	if domain != u.domain || o.Kind == outcome.ClientCanceled {
		return u.idle()
	}
	if !u.fail.failure(o) {
		if u.state == Failover {
			return u.toPrimary(now, ReasonPrimarySuccess)
		}
		u.streak = 0
		return u.idle()
	}
	if u.state != Primary && u.state != Backup {
		return u.idle() // FAILOVER and RECOVERY are probing already
	}
	r := u.failure(now)
	if r == ReasonNone && u.state == Primary && u.fastAnswers && answered(o) {
		r = ReasonAnsweredFailure
	}
	if r != ReasonNone {
		if u.state == Primary {
			return u.toFailover(now, r)
		}
		return u.toRecovery(now, r, true)
	}
	return u.idle()
}

// failure records a network failure on the traffic domain and returns the
// trigger it completes, or ReasonNone.
func (u *Uber) failure(now time.Time) Reason {
	if u.streak == 0 {
		u.streakStart = now
	}
	u.ring[u.streak%u.threshold] = now
	u.streak++
	// After the increment, ring[streak%threshold] holds the oldest of the
	// last `threshold` failures.
	if u.streak >= u.threshold && now.Sub(u.ring[u.streak%u.threshold]) <= u.window {
		return ReasonFailures
	}
	if now.Sub(u.streakStart) >= u.streakTimeout {
		return ReasonStreakTimeout
	}
	return ReasonNone
}

// CanaryDone implements Policy. Results for a domain whose canary the policy
// is not waiting for are ignored.
func (u *Uber) CanaryDone(now time.Time, domain int, o outcome.Outcome) Action {
	if domain != u.canary || domain == None {
		return u.idle()
	}
	u.canary = None
	ok := o.Kind == outcome.Success
	switch u.state {
	case Failover:
		switch {
		case domain == PrimaryIndex && u.held != None: // ConfirmPrimary
			if ok {
				return u.toPrimary(now, ReasonPrimaryConfirmed)
			}
			return u.toBackup(now, u.held, ReasonCanarySuccess)
		case domain == PrimaryIndex && ok: // offline check: primary answers
			return u.toPrimary(now, ReasonRecoverySuccess)
		case domain == PrimaryIndex:
			return u.toPrimary(now, ReasonDeviceOffline)
		case ok && u.confirm:
			u.held = domain
			u.confirmBy = u.confirmDeadline(now)
			return u.ask(now, PrimaryIndex)
		case ok:
			return u.toBackup(now, domain, ReasonCanarySuccess)
		case domain < u.n:
			return u.ask(now, domain+1)
		case u.offlineCheck:
			return u.ask(now, PrimaryIndex)
		default:
			u.roundAt = now.Add(u.retryDelay(u.rounds))
			u.rounds++
			return u.idle()
		}
	case Recovery:
		switch {
		case ok && domain == PrimaryIndex:
			return u.toPrimary(now, ReasonRecoverySuccess)
		case ok:
			return u.toBackup(now, domain, ReasonCanarySuccess)
		case u.sweep:
			if next := u.nextBackup(domain); next != None {
				return u.ask(now, next)
			}
		}
		return u.toBackup(now, u.domain, ReasonRecoveryFailure)
	}
	return u.idle()
}

// nextBackup returns the backup after d, skipping the traffic domain, or
// None at the end of the list.
func (u *Uber) nextBackup(d int) int {
	for next := d + 1; next <= u.n; next++ {
		if next != u.domain {
			return next
		}
	}
	return None
}

// Tick implements Policy.
func (u *Uber) Tick(now time.Time) Action {
	switch u.state {
	case Primary:
		if u.streakExpired(now) {
			return u.toFailover(now, ReasonStreakTimeout)
		}
	case Failover:
		if u.canary == None && !u.roundAt.IsZero() && !now.Before(u.roundAt) {
			u.roundAt = time.Time{}
			return u.ask(now, 1)
		}
		if u.confirmExpired(now) { // the primary did not answer in time
			u.canary = None // its late answer is ignored
			return u.toBackup(now, u.held, ReasonCanarySuccess)
		}
	case Backup:
		if !now.Before(u.recoveryAt) {
			return u.toRecovery(now, ReasonRecoveryTimer, false)
		}
		if u.streakExpired(now) {
			return u.toRecovery(now, ReasonStreakTimeout, true)
		}
	}
	return u.idle()
}

func (u *Uber) streakExpired(now time.Time) bool {
	return u.streak > 0 && now.Sub(u.streakStart) >= u.streakTimeout
}

// NetworkChanged implements Policy.
func (u *Uber) NetworkChanged(now time.Time) Action {
	u.streak = 0
	switch u.state {
	case Failover:
		return u.toPrimary(now, ReasonNetworkChanged)
	case Backup:
		return u.toRecovery(now, ReasonNetworkChanged, false)
	}
	return u.idle()
}

// transitions

func (u *Uber) toFailover(now time.Time, r Reason) Action {
	from := u.state
	u.state = Failover
	u.streak = 0
	u.roundAt = time.Time{}
	u.canary = 1
	u.askedAt = now
	u.held = None
	u.confirmBy = time.Time{}
	u.rounds = 0
	return u.act(1, from, r)
}

func (u *Uber) toBackup(now time.Time, domain int, r Reason) Action {
	from := u.state
	if from == Failover && r == ReasonCanarySuccess || from == Recovery && r == ReasonRecoveryFailure {
		u.record(now) // the primary failed (again) on this network
	}
	if from == Failover && u.decay > 0 {
		if steps := int(now.Sub(u.primarySince) / u.decay); steps > 0 {
			u.entries = max(u.entries-steps, 0)
		}
	}
	if u.entries == 0 || u.recoveryDelay(u.entries) < u.rtMax {
		u.entries++
	}
	u.recoveryAt = now.Add(u.recoveryDelay(u.entries))
	u.settle(Backup, domain)
	return u.act(None, from, r)
}

// settle puts traffic on domain in state s with no probe in progress: no
// failure streak, no canary awaited or held, no canary round pending.
func (u *Uber) settle(s State, domain int) {
	u.state = s
	u.domain = domain
	u.streak = 0
	u.canary = None
	u.held = None
	u.confirmBy = time.Time{}
	u.sweep = false
	u.roundAt = time.Time{}
	u.rounds = 0
}

func (u *Uber) toRecovery(now time.Time, r Reason, sweep bool) Action {
	from := u.state
	u.state = Recovery
	u.streak = 0
	u.sweep = sweep
	u.canary = PrimaryIndex
	return u.act(PrimaryIndex, from, r)
}

func (u *Uber) toPrimary(now time.Time, r Reason) Action {
	from := u.state
	switch r {
	case ReasonPrimarySuccess, ReasonPrimaryConfirmed, ReasonRecoverySuccess:
		u.forget() // the primary answers on this network
	}
	if u.domain != PrimaryIndex {
		u.primarySince = now
	}
	u.settle(Primary, PrimaryIndex)
	return u.act(None, from, r)
}

// ask requests a canary to domain, without a state change.
func (u *Uber) ask(now time.Time, domain int) Action {
	u.canary = domain
	u.askedAt = now
	return Action{Canary: domain, Wake: u.wake()}
}

func (u *Uber) act(canary int, from State, r Reason) Action {
	return Action{
		Canary:     canary,
		Wake:       u.wake(),
		Transition: Transition{From: from, To: u.state, Reason: r, Domain: u.domain},
	}
}

func (u *Uber) idle() Action { return Action{Canary: None, Wake: u.wake()} }

// wake is the next time Tick has work, or zero.
func (u *Uber) wake() time.Time {
	switch u.state {
	case Primary:
		if u.streak > 0 {
			return u.streakStart.Add(u.streakTimeout)
		}
	case Failover:
		if u.canary == None {
			return u.roundAt
		}
		if u.held != None {
			return u.confirmBy
		}
	case Backup:
		if u.streak > 0 {
			if t := u.streakStart.Add(u.streakTimeout); t.Before(u.recoveryAt) {
				return t
			}
		}
		return u.recoveryAt
	}
	return time.Time{}
}

// successIsNoop reports whether a successful Report for the traffic domain
// would change nothing, which lets the Transport skip its lock on the common
// path.
func (u *Uber) successIsNoop() bool {
	return u.streak == 0 && u.state != Failover
}
