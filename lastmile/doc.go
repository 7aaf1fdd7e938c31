// Package lastmile decides how a client reaches a domain when the last mile
// is hostile: which address, found how, over which protocol. It is the ZEGO
// SDK chain of SYSTEM.md's seed 002 as an http.RoundTripper that sits under
// the failover package: failover picks the domain, lastmile reaches it.
//
//	rt, _ := lastmile.New(cfg, lastmile.Options{})
//	ft, _ := failover.NewTransport(fcfg, rt)
//	client := &http.Client{Transport: ft}
//
// For a request to host H the Transport uses H's working route if it has one
// (no DNS, pooled connections). Otherwise it runs the route chain in the
// configured order, staggered (happy eyeballs across steps and across a
// step's nodes: the next one starts when the one before failed or had no
// route after Config.Stagger; on a cold start the direct step starts with
// the scheduler's request). One chain run per host serves every concurrent
// request, for failure as for success, and a failed run is remembered for
// Config.NoRouteHold. The steps:
//
//   - scheduler: ask the scheduling service ("access-ctrl") for access nodes
//     (schema in docs/lastmile.md), cached with the answer's TTL;
//   - direct: resolve H through the resolver chain;
//   - cdn: the CDN vendor domains in order, each resolved through the chain;
//   - fallback_ip: hard-coded load-balancer addresses, dialled with the
//     right TLS server name.
//
// Each candidate address is reached by racing HTTP/3 against TCP (HTTP/2 over
// TLS, HTTP/1.1 when the server does not offer h2): QUIC starts first, TCP
// after Race.TCPDelay; the first handshake to complete wins and carries the
// request. QUIC is tried only on nodes that advertised HTTP/3 (Alt-Svc, a
// scheduler answer) unless Race.AssumeH3; a closed UDP port (ICMP
// unreachable) fails it at once. A protocol that fails on a node is
// remembered as broken for 5 min × 2ⁿ (capped), per network
// (Options.NetworkName), and persisted with the DNS cache.
//
// The resolver chain (Resolver) tries, in a configurable order, the system
// resolver, the private DNS over UDP, the private DNS over UDP and TCP raced,
// DNS over HTTPS (RFC 8484) and bootstrap addresses; an answer outside the
// expected ranges configured for a domain is treated as hijacked. Answers are
// cached with their TTL and served stale (RFC 8767) after the client
// response timer (DNSConfig.StaleAnswerTimeout) or when every source fails,
// while the lookup goes on to refresh the cache; a resolver that timed out
// is not asked again for DNSConfig.DeadServerHold. The cache is persisted
// to disk so that a cold start survives a DNS outage.
//
// Every request can carry a *Trace (WithTrace) that records the step that
// served it, every failed step with its outcome.Kind and cause, and every
// candidate skipped without an attempt; the same facts are counted in
// veer_lastmile_* metrics.
//
// Contract: once a route works, RoundTrip adds a lock-free map lookup and an
// atomic load to the inner transport. Only connection establishment is
// retried across steps: a request is never sent twice. When a reused route
// fails in a way that proves the request never left (a refused dial, a
// failed handshake: outcome.Kind.NotSent) and its body can be replayed, the
// route is dropped and that request goes once through a fresh chain run;
// any other failure is returned as is. NetworkChanged (or
// Config.MaxRouteFailures consecutive network failures on a route) drops
// routes and connections so that the next request re-runs the chain.
//
// Failure mode: when every step fails, RoundTrip returns an error wrapping
// ErrNoRoute whose outcome.Kind is that of the last failure, and the Trace
// lists every failure. A request whose deadline passes while its route is
// being discovered fails with outcome.DialCanceled (ErrDiscoveryDeadline), a
// network failure of the host; only the caller's own cancellation is
// outcome.ClientCanceled.
package lastmile
