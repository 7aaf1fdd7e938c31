// Package breaker protects a caller from a failing dependency: a multi-level
// circuit breaker that admits less traffic the more of it fails
// (FunctionGraph's "circuit breaking in several levels by failure rate", seed
// 003), and Google SRE client-side adaptive throttling.
//
// # Breaker
//
// A Breaker counts the outcomes of admitted requests in a rolling window
// (Config.Window split into Config.Buckets). Once the window holds at least
// Config.MinRequests outcomes, the failure ratio picks a level: by default
// ≥ 50 % failures admit 50 % of requests, ≥ 80 % admit 10 %, ≥ 95 % open the
// circuit. Partial admission is deterministic (a credit accumulator admits
// exactly the configured share, evenly spread), so a step table can assert
// it. An open circuit rejects everything for Config.OpenFor, then turns
// half-open: at most Config.MaxProbes requests in flight at once probe the
// dependency; Config.ProbeSuccesses successes close the circuit, any failure
// opens it again.
//
// Admission is two-step: Allow returns a done function that the caller must
// call exactly once with the attempt's outcome.Outcome. Each transition
// between closed, open and half-open starts a new generation; a done from an
// older generation is dropped, so a slow request admitted before the circuit
// opened cannot close it. AllowAt and DoneAt are the pure core: they take the
// time as an argument and never read a clock.
//
// Which outcomes are failures is configurable (Options.Classify). The default
// counts network failures (DNS, connect, TLS, resets, timeouts) and 5xx
// (ServerError, Overloaded) as failures; 4xx and 429 (Limited) are
// successes of the dependency, and a caller's own cancellation is ignored.
//
// # Throttle
//
// Throttle implements client-side adaptive throttling (Site Reliability
// Engineering, "Handling Overload"): over a rolling window it counts requests
// and the dependency's accepts, and rejects a new request locally with
// probability max(0, (requests − K·accepts) / (requests + 1)), K = 2 by
// default. It needs no threshold: it starts shedding as soon as the
// dependency rejects more than (K−1)/K of the traffic, and stops as it
// recovers.
//
// Failure mode: both types hold only counters; a caller that never calls done
// leaves a half-open probe slot taken, which the Breaker reclaims after
// OpenFor by starting a new half-open generation. Both are safe for concurrent
// use; the state is guarded by one short mutex section per call (no
// allocation on the hot path).
package breaker
