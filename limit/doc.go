// Package limit is flow control in every hop (FunctionGraph, seed 003):
// multi-dimensional rate and concurrency limits, a body-size guard, and the
// adapters that answer 429 with a Retry-After.
//
// A request carries one key per configured dimension (for example region,
// tenant, API, function, node: Config.Dimensions, in order). Each dimension
// has a default Limits and per-key overrides; a Limits may set a rate (GCRA,
// the virtual-scheduling form of a token bucket, with a burst) and/or a
// concurrency cap (requests in flight, for calls that run for minutes). All
// dimensions are checked together: a request is admitted only if every
// dimension admits it, and a rejection takes nothing from any dimension (the
// dimensions admitted before the rejecting one are rolled back). A rejection
// names the dimension and carries a Retry-After computed from the limiter
// state: the time until the GCRA would admit the request.
//
// The local Limiter decides in memory with no allocation: an atomic
// compare-and-swap on each key's theoretical arrival time and an atomic
// in-flight counter, under the read lock of the key's shard (one of 32 per
// dimension), which an eviction's write lock excludes, so that a request is
// never decided on an entry being evicted. Keys are kept per dimension up to
// Config.MaxKeys; idle keys whose bucket is full and who have nothing in
// flight are evicted without loss; past the cap new keys share one overflow
// entry per dimension (counted in veer_limit_key_overflow_total), so a flood
// of distinct keys can neither exhaust memory nor escape the limits.
//
// Middleware answers 429 through outcome.WriteHTTP; the gRPC interceptor
// lives in limit/limitgrpc (ResourceExhausted) and the Redis-backed shared
// limiter in limit/limitredis, so this package depends on neither. Both the
// local and the Redis limiter implement Admitter. Apply replaces the config
// at run time, keeping the key state; config/watch reloads a YAML file
// through it (watch.File(path, opts, l.Apply)).
//
// BodyLimit answers 413 to requests that declare or send more than the limit
// without reading them whole; LimitResponse guards a client against huge
// responses.
//
// Failure mode: a limiter never fails open. An unknown key gets the
// dimension's default limits; a key beyond the cap shares the overflow entry.
package limit
