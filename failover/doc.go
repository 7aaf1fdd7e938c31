// Package failover implements client-side domain failover: Uber's failover
// state machine with canary requests (seed 000), and the round-robin and
// threshold baselines it was measured against, behind one Policy interface;
// and Transport, an http.RoundTripper that applies a policy to real traffic.
//
// The policies are pure cores (see Policy) so that the simulator drives the
// very same code in virtual time.
package failover
