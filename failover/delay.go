package failover

import "time"

// RecoveryAt returns when the recovery timer fires; meaningful in BACKUP.
func (u *Uber) RecoveryAt() time.Time { return u.recoveryAt }

// recoveryDelay is the delay of the k-th entry into BACKUP (k >= 1).
func (u *Uber) recoveryDelay(k int) time.Duration {
	if k < 1 {
		k = 1
	}
	d := u.rtBase
	if u.rtStep > 0 {
		steps := (u.rtMax - u.rtBase) / u.rtStep // steps before the cap
		if int64(k-1) > int64(steps) {
			return u.rtMax
		}
		d += time.Duration(k-1) * u.rtStep
	}
	return min(d, u.rtMax)
}

// retryDelay is the pause after the failed canary round that follows k
// earlier failed rounds (k >= 0): CanaryRetryInterval doubled k times,
// capped at CanaryRetryMax.
func (u *Uber) retryDelay(k int) time.Duration {
	d := u.retry
	for ; k > 0 && d < u.retryMax; k-- {
		if d > u.retryMax/2 {
			return u.retryMax
		}
		d *= 2
	}
	return min(d, u.retryMax)
}
