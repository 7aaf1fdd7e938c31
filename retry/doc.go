// Package retry retries with an end (FunctionGraph, seed 003): bounded
// attempts, exponential backoff with full jitter, a cap per wait, a total
// deadline, the server's Retry-After, a retry budget that stops retry storms,
// and the safety rule "retry only if the request never reached the upstream,
// or the method is idempotent, or the request carries an Idempotency-Key".
//
// Config is the plain config; Retrier applies it. Retrier.Start begins one
// logical request and returns a Call; Call.Next takes each attempt's
// outcome.Outcome and answers how long to wait before the next attempt, or
// why to stop (ErrAttempts, ErrDeadline, ErrBudget, ErrUnsafe,
// ErrNotRetryable, ErrRetryAfter). Retrier.Do runs that loop for a function;
// Transport runs it for an http.RoundTripper, replaying request bodies through
// Request.GetBody.
//
// Async is the seed's schedule for asynchronous invocations: waits of 2, 4, 8
// … seconds, capped at 20 minutes, for at most 6 hours in all. The waits
// double ten times (2 + 4 + … + 1024 = 2046 s); the eleventh would be 2048 s,
// over the cap, so from then on every wait is 1200 s. 6 h = 21 600 s leaves
// 21 600 − 2046 = 19 554 s, room for ⌊19 554 / 1200⌋ = 16 capped waits
// (ending at 2046 + 19 200 = 21 246 s); a 17th would end at 22 446 s, past
// the deadline. So an async invocation is retried 10 + 16 = 26 times (27
// attempts), and reported failed when the 27th fails, 5 h 54 min 6 s after
// the first attempt (plus the attempts' own durations).
//
// Transient is the seed's rule for Redis and HTTP client calls: up to 3
// retries with a fixed sleep, only on a dropped connection (EOF, reset) or an
// i/o timeout.
//
// Budget: retries may add at most Ratio (default 20 %) of the requests seen
// in the last Interval (default 10 s), and at least MinRetries (default 3)
// per Interval, so a dependency that fails outright sees at most 1.2× its
// normal load instead of MaxAttempts×.
//
// Failure mode: when a Call stops, the caller gets the last attempt's
// outcome and the reason; nothing is retried behind its back.
package retry
