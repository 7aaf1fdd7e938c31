// Package failover implements client-side domain failover: Uber's failover
// state machine with canary requests (seed 000), the default "veer" policy
// built on it (confirmation by a primary canary, failures that are answers
// as evidence, a per-network memory of primary failures), and the
// round-robin and threshold baselines, behind one Policy interface; and
// Transport, an http.RoundTripper that applies a policy to real traffic.
//
// # Policies
//
// The policies (Uber, RoundRobin, Threshold) are pure cores: they take the
// time and the outcomes of requests and canaries as arguments and answer
// with an Action (which canary to send, when to be woken, which transition
// happened). They never read a clock, sleep, start goroutines or do I/O, and
// Report does not allocate, so the simulator drives the very same code in
// virtual time, millions of outcomes a second. Domains are indices: 0 is the
// primary, 1..n the backups in configured order. Only network outcomes
// (outcome.Kind.Network) count as failures, and the statuses listed in
// Config.FailureStatuses (opt-in); any other HTTP status from a reachable
// server proves the domain reachable. NewPolicy maps a Config to its policy,
// for the Transport and the simulator alike.
//
// # Transport
//
// Transport rewrites each request addressed to the primary to the domain the
// policy picks (URL host and Host header, so TLS server name and HTTP/2 or
// HTTP/3 authority follow), classifies the result with the outcome package
// and reports it; an error while the caller reads the body is reported too,
// and a success that may change the state counts when the body has been
// read. SetNetwork tells it which network the device is on. The request
// path reads an immutable snapshot through an atomic pointer (no lock, goroutine or timer per request); failures take a
// lock to reach the policy. Canaries go through the wrapped round tripper to
// Config.CanaryPath with the "Veer-Canary: 1" header, one in flight per
// domain, each bounded by Config.CanaryTimeout. One timer on Config.Clock
// runs the policy's wake-ups. The backup in use is persisted through a Store
// (FileStore writes atomically) so that the next start begins in BACKUP and
// probes the primary on its recovery timer.
//
// # Failure modes
//
// A policy only knows what it is told: outcomes of requests that never went
// through the Transport are not seen, and a body the caller never reads nor
// closes reports nothing. A canary path that answers 2xx although the real endpoints
// fail makes the machine trust a broken domain; point CanaryPath at a check
// that exercises the serving path. An unreadable store file is ignored with
// a warning (the Transport starts in PRIMARY); a store write that fails is
// logged and the Transport carries on in memory. When every domain is
// unreachable the Uber policy keeps traffic on primary and keeps probing,
// with rounds CanaryRetryInterval apart and doubling up to CanaryRetryMax
// (or, with DeviceOfflineCheck, concludes that the device is offline and
// stops probing until the next run of failures). The seed's race (a backup
// canary that gets through a loss burst or right after a tunnel moves
// traffic to BACKUP although primary was fine) costs one BACKUP stint of
// the current recovery delay; ConfirmPrimary removes most of these stints
// for one extra canary before each entry into BACKUP.
package failover
