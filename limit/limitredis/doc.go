// Package limitredis shares limit's multi-dimensional limits among several
// instances through Redis, and falls back to local limits when Redis is
// unreachable.
//
// Rate limits are GCRA, computed in one Lua script with the Redis server's
// TIME (instances' clocks never matter); concurrency limits are leases in a
// sorted set per key, scored by their expiry: an instance renews the leases
// it holds every LeaseTTL/3, so a crashed instance's slots come back after
// LeaseTTL at most. One script checks every dimension of a request and
// commits only if all admit, so a rejection consumes nothing. Releasing a
// permit that holds Redis leases costs one round trip (a ZREM), waited for
// so that a released slot is free for the very next decision.
//
// Batching: decisions (and releases) that arrive while earlier ones are on
// the wire are sent together, in one round trip, the decisions in one
// script call that decides each request in turn exactly as separate calls
// would; two batches at most are in flight, and a lone decision goes out at
// once. Under concurrency this divides the client's and Redis's work per
// decision (BenchmarkAdmitParallel reports both as CPU time per decision).
// With a *redis.ClusterClient each decision is its own script call,
// pipelined.
//
// Precision: the script keeps time in nanoseconds (whole seconds and the
// nanoseconds within, each exact in a Lua double) and the emission interval
// 1e9/rate ns with its fraction, so a shared limit admits what an exact GCRA
// admits at any rate Config accepts (up to 1e9/s): TestPrecisionAtHighRates
// feeds the script and an exact integer GCRA the same request times, from
// 30 000/s to 1e9/s, and the counts are equal.
//
// Redis keys: Prefix + "r:" (a GCRA key) or "c:" (a lease set) + the
// length of the dimension's name + ":" + name + ":" + the request's key,
// e.g. "veer:limit:r:6:tenant:acme". The length prefix makes the encoding
// unambiguous: no choice of dimension names and keys (which come from
// request headers) can make two dimensions share a bucket.
//
// Fallback: when a Redis call fails (refused, reset, timeout after
// Config.Timeout), the request and every request after it are decided by a
// local limit.Limiter holding Config's limits divided by Config.Instances,
// never by "unlimited"; a background probe (every ProbeInterval) returns to
// Redis when it answers again. With the defaults (100 ms timeout) the switch
// takes at most one timeout, well within a second. Metrics:
// veer_limitredis_fallback_state, veer_limitredis_fallbacks_total,
// veer_limitredis_recoveries_total, veer_limitredis_errors_total,
// veer_limitredis_decision_seconds.
//
// The go-redis client is the caller's: give it short timeouts and few
// retries (ContextTimeoutEnabled: true, MaxRetries: 1 or -1) so that a dead
// Redis shows as an error quickly. Keys of one request are touched by one
// script, so with Redis Cluster all of a request's keys must hash to one
// slot (use a Prefix with a {hash tag}); a single Redis or a primary with
// replicas needs nothing.
//
// Apply changes the limits and the number of instances at run time
// (config/watch calls it on a file change); the Redis connection settings,
// prefix and timers are fixed at New.
//
// Failure mode: while in fallback the instances do not see each other's
// traffic, so the aggregate admitted rate is at most the shared limit (N
// instances × limit/N); concurrency slots taken locally are not known to
// Redis after recovery and vice versa until they are released.
package limitredis
