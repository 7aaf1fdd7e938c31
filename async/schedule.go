package async

import (
	"strconv"
	"time"

	"github.com/veerhq/veer/outcome"
)

// Decision is what follows an attempt: success, another attempt after
// Wait, or failure.
type Decision struct {
	State State         // Succeeded, Retrying or Failed
	Wait  time.Duration // before the next attempt, when Retrying
	// Reason names the outcome that made the invocation retry or fail.
	Reason string
}

// The seed's schedule (retry.Async(): 2, 4, 8 … s, capped at 20 min
// between attempts, 6 h in all). async sits in the layer of retry, whose
// packages do not import each other, so it keeps the four numbers itself;
// a test asserts that its waits are retry.Async().Schedule().
const (
	ScheduleInitial    = 2 * time.Second
	ScheduleMultiplier = 2
	ScheduleMaxWait    = 20 * time.Minute
	ScheduleDeadline   = 6 * time.Hour
)

// Backoff is the wait before retry n (1 for the first): ScheduleInitial ·
// ScheduleMultiplier^(n−1), capped at ScheduleMaxWait.
func Backoff(n int) time.Duration {
	w := ScheduleInitial
	for i := 1; i < n && w < ScheduleMaxWait; i++ {
		w *= ScheduleMultiplier
	}
	return min(w, ScheduleMaxWait)
}

// Decide is the retry schedule driver, a pure function: attempt n (1 for
// the first) started the schedule at first and ended at now with outcome
// o. Success ends it. A 4xx other than 429 fails at once. Everything else
// (network errors, timeouts, 5xx, 429, 503) retries after
// Backoff(n) (2 s doubling to 20 min), or after the upstream's
// Retry-After when that is longer, as long as the next attempt starts
// within 6 h of the first; otherwise the invocation fails with o.
func Decide(n int, first, now time.Time, o outcome.Outcome) Decision {
	switch o.Kind {
	case outcome.Success:
		return Decision{State: Succeeded}
	case outcome.ClientError:
		return Decision{State: Failed, Reason: reason(o) + " (not retried)"}
	}
	wait := max(Backoff(n), o.RetryAfter)
	if now.Add(wait).Sub(first) > ScheduleDeadline {
		return Decision{State: Failed, Reason: reason(o) + " (retry schedule exhausted)"}
	}
	return Decision{State: Retrying, Wait: wait, Reason: reason(o)}
}

func reason(o outcome.Outcome) string {
	if o.Status != 0 {
		return o.Kind.String() + " " + strconv.Itoa(o.Status)
	}
	return o.Kind.String()
}
