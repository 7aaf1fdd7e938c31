// Package async is veer's durable invocation queue, engine-independent: a
// request submitted asynchronously is stored, answered 202 Accepted with an
// invocation id, and run later by workers through a Dispatcher (the
// gateway's own cluster dispatch), retried on the seed's schedule (2, 4, 8
// … s, at most 20 min apart, 6 h in all), and recorded succeeded or failed
// (a dead letter). The store is an Engine; async/asyncnats is the one
// implementation, on NATS JetStream (an in-process nats-server by default,
// an external cluster for several gateways), so this package imports no
// NATS code.
//
// Contract:
//   - Submit (and ServeSubmit's 202) returns only after Engine.Enqueue
//     reports the invocation stored durably (asyncnats: the server's
//     acknowledgement of a write synced to disk). An Idempotency-Key
//     makes submission idempotent per tenant within the idempotency window:
//     the same key returns the first submission's id and stores nothing.
//   - Delivery is at least once: a worker records "running" before each
//     attempt and the final state before acknowledging, so a worker that
//     dies mid-attempt loses nothing (the engine delivers it again after
//     the ack deadline) and one that dies after finishing runs nothing
//     again (the redelivery sees the final state). An attempt that reached
//     the upstream but whose outcome was not recorded runs again: the
//     upstream sees the same Veer-Invocation-Id and Idempotency-Key.
//   - Decide is the schedule: success ends; a 4xx other than 429 fails at
//     once; network errors, timeouts, 5xx, 429 and 503 retry after
//     Backoff(n), or the upstream's Retry-After when longer, while the next
//     attempt starts within 6 h of the first.
//   - Each group (Config.Groups: general, dedicated ones, and always
//     "retry" and "timer") has its own workers and scheduler; a scheduler
//     takes turns over the group's tenants, one invocation each (deficit
//     round robin with a quantum of one), skipping a tenant over
//     Config.TenantRate or paused, so a tenant's backlog never stands in
//     front of another tenant and a group whose upstream hangs holds only
//     its own workers. Every attempt after the first runs in the retry
//     group (Engine.Requeue moves it there, due at its next attempt), so a
//     storm of retries never holds the workers of first attempts; a
//     delayed submission (Invocation.NotBefore, from Veer-Delay or
//     Veer-Not-Before, at most Config.MaxDelay ahead) runs in the timer
//     group, never before its time on the service's clock.
//   - Pause and Resume are recorded in the engine, so every service on the
//     same store honours them (within one consumption interval) and a
//     restart keeps them.
//   - Metrics carry a tenant label only on veer_async_tenant_*: the top
//     Config.MetricTenants tenants by recent submissions, every other as
//     "other" (at most N+1 values however many tenants submit).
//   - ServeStatus answers GET /v1/invocations/{id} (queued, running,
//     retrying with next_attempt, succeeded with upstream_status, failed
//     with reason) for the id's own tenant only (another tenant's id is
//     404), and the tenant's list with paging.
//
// Failure mode: a store that cannot be reached or does not acknowledge in
// Config.SubmitTimeout makes ServeSubmit answer 503 with Retry-After and
// nothing is accepted; a body above Config.MaxBody is 413 and nothing is
// stored; a malformed Idempotency-Key is 400. While the store is down,
// workers log and try again each second; nothing is lost.
package async
