package failover

import (
	"errors"
	"syscall"
	"time"

	"github.com/veerhq/veer/outcome"
)

// minConfirmWait is the least time the veer policy waits for the primary's
// confirming canary (see confirmDeadline).
const minConfirmWait = time.Second

// NewVeer returns the default policy of failover.Config{}: the Uber machine
// (seed 000) with three changes, each argued from evidence in
// docs/failover.md:
//
//   - ConfirmPrimary: a backup canary success in FAILOVER is confirmed by a
//     canary to the primary before BACKUP; the primary's canary counts as
//     failed if it has not answered within twice the time the backup took
//     to answer (at least 1s, at most CanaryTimeout): the primary, the
//     nearer domain, is expected to answer at least as fast.
//   - Answers are evidence: in PRIMARY a failure that is an answer from the
//     network (DNS not-found or server failure, connection refused, TLS or
//     QUIC handshake rejected) starts FAILOVER at once, where silence
//     (timeouts, resets) still needs FailureThreshold failures: a loss burst
//     or a tunnel gives silence, not answers. The confirmation above guards
//     against an answer that was the user's network's doing.
//   - Memory per network (NetworkAware, HistoryTTL, HistorySize): a launch
//     or a network change onto a network where the primary failed recently
//     starts FAILOVER at once.
//
// DeviceOfflineCheck and FailureStatuses apply as configured.
func NewVeer(cfg Config) (*Uber, error) {
	cfg.ConfirmPrimary = true
	u, err := NewUber(cfg)
	if err != nil {
		return nil, err
	}
	u.useHist = true
	u.fastAnswers = true
	u.confirmMin = minConfirmWait
	return u, nil
}

// answered reports whether a failure is an answer from the network rather
// than silence. "No route" errors (network or host unreachable: the device
// itself is offline), which outcome files under connect_refused or a DNS
// server failure, are not answers.
func answered(o outcome.Outcome) bool {
	switch o.Kind {
	case outcome.DNSNotFound, outcome.DNSServerFailure, outcome.ConnectRefused,
		outcome.TLSHandshake, outcome.QUICHandshake:
		return o.Err == nil || !errors.Is(o.Err, syscall.ENETUNREACH) && !errors.Is(o.Err, syscall.EHOSTUNREACH)
	}
	return false
}

// confirmDeadline is when the confirming primary canary, asked at now,
// counts as failed: twice the time the backup's canary took (asked at
// askedAt), at least confirmMin, at most CanaryTimeout; zero (wait for the
// canary's own timeout) when confirmMin is not set (the uber policy).
func (u *Uber) confirmDeadline(now time.Time) time.Time {
	if u.confirmMin <= 0 {
		return time.Time{}
	}
	w := max(2*now.Sub(u.askedAt), u.confirmMin)
	if u.canaryTimeout > 0 {
		w = min(w, u.canaryTimeout)
	}
	return now.Add(w)
}

// confirmExpired reports whether the confirming primary canary is overdue.
func (u *Uber) confirmExpired(now time.Time) bool {
	return u.held != None && u.canary == PrimaryIndex && !u.confirmBy.IsZero() && !now.Before(u.confirmBy)
}
