// Package gateway is veer's edge proxy: it routes requests by host and path
// prefix to clusters of backends, balances within a cluster by the power of
// two choices over least outstanding requests (weighted, with slow start),
// watches backend health actively (rise/fall) and passively (outlier
// ejection for 30 s × n, capped, at most a share of a cluster, panic mode),
// moves a failing or frozen cluster's traffic to the route's other
// clusters and gives it back gradually, bounds each attempt by a timeout
// derived from the route's own latency, retries failed attempts on another cluster (retry and
// outcome: at most 3 attempts, only when safe, within a budget), and guards
// every request in a fixed order:
//
//	route match (404)
//	→ body guard (413, limit.BodyGuard; counted and logged under the route)
//	→ limits (429, limit.AdmitHTTP over limit or limitredis through
//	  Options.SharedLimiter)
//	→ criticality shedding per route (503, shed.AdmitHTTP, the path of
//	  shed.Middleware; the route name is the endpoint)
//	→ per-cluster multi-level breaker (503, breaker; checked per attempt)
//	→ dispatch (cluster pick, backend pick, attempt, retry)
//
// Contract: the whole configuration is one immutable snapshot (a compiled
// routing table) read by the request path through an atomic pointer and
// replaced as a whole by Apply, which validates everything first and names
// the field it rejects; a rejected Apply changes nothing. Apply serves a
// file watcher (config/watch), SIGHUP, and later a control-plane store
// watch alike. Backend and cluster state (outstanding requests, ejections,
// health, drain) and breakers outlive snapshots while their names stay.
// Drain is state, not config: Drain(cluster, backend, true) stops new
// requests; those in flight finish.
//
// The Dispatcher seam (an http.RoundTripper reading the route from the
// request context) is where an async queue dispatcher plugs in; the route's
// cluster selection (ordered or weighted, scaled by each cluster's share)
// is where gray release will add canary selection.
//
// Async: a route marked async: true, or a request with Prefer:
// respond-async while the queue runs (async.enabled or an async route), is stored in the
// durable queue (package async; JetStream wired by gateway/gatewayasync)
// and answered 202 with an invocation id once stored; the queue's workers
// run it later through this same dispatch. /v1/invocations/ on every host
// is the status API, /admin/async/ on the admin listener its operations.
//
// The HTTP/1 wire engine (framing and smuggling refusal, TLS termination,
// parking idle keep-alive connections, the own HTTP/1.1 upstream client,
// write counting) lives in gateway/internal/h1, which knows no gateway
// type; this package keeps routes, guards and dispatch. One attempt's
// steps (breaker, pick, target, send, classify, judge, release) are
// dispatcher.try in attempt.go.
//
// HTTP/3 lives in gateway/gatewayh3 and Redis-shared limits in
// gateway/gatewayredis, so that this package links neither QUIC nor a
// Redis client; cmd/veer wires both.
//
// FollowStore makes a running gateway follow the control plane's
// gateway/criticality and gateway/limits documents (any store.Store;
// cmd/veer wires etcd from the control_store section): while present they
// replace the file's shed table and limits, deleted the file's apply again;
// an invalid document is logged and counted and the last good config stays.
// It also follows the release/<route> documents (release.Rollout): a route
// with a rollout sends each tenant (Route.TenantHeader) to the plan's from
// or to cluster as Rollout.Assign says, counts each version's requests,
// errors and slow answers per step (GET /admin/release) and publishes them
// to release.CountsKey every second for the control plane's analysis.
//
// Callers (GET /admin/callers, open on the admin listener) reports, per
// route, the Rpc-Caller values whose requests reached shed admission in
// the last hour with their counts and the tier the shed table in force
// gives them, bounded (60 one-minute buckets, 100 callers a route, the rest
// as "other"); the console pre-fills gateway/criticality from it.
//
// Failure mode: an attempt that fails with a system error is retried on
// another cluster when safe; when every attempt fails the client gets the
// last upstream answer, or the outcome's status from outcome.WriteHTTP (502
// connect/reset, 504 timeout, 503 overload or nothing available, with
// Retry-After). A route with stale_on_error answers GETs from its cache when
// the upstream fails. The access log never blocks a request: entries beyond
// its queue are dropped and counted.
package gateway
