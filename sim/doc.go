// Package sim is veer's discrete-event simulator: it reproduces seed 000's
// (Uber's) evaluation of client domain failover in virtual time, driving the
// very policies of package failover (the Transport's code, never a copy)
// through modelled mobile networks and domain outages.
//
// A Scenario (YAML, see ParseScenario and docs/sim.md) describes a
// population of app sessions (phased Poisson traffic, a low-traffic class,
// relaunches, network changes), the devices' own networks (Gilbert-Elliott
// bursty loss per network type, tunnels, Mahimahi trace gaps, QUIC
// blocking), the domains (a near QUIC primary, far TCP backups, with
// RTT-based latency, server time and cold-connection set-up) and outages
// scoped to carriers, regions and network types, with kinds and flapping.
// Run simulates it under each Strategy and returns a Result: traffic share,
// error rate, latency percentiles, QUIC share, failovers and canaries per
// session, outage detection and recovery times, by network condition,
// carrier and traffic class. Write renders it as a table, Markdown or JSON;
// package sim/plot draws the charts.
//
// Contract: a Result depends only on the scenario, the strategies, the
// session count and the seed — not on the number of workers or the machine
// — so the same inputs give byte-identical output. Every strategy sees the
// same realisation of every session (paired random streams). Policies are
// called from one goroutine per session and never concurrently.
//
// Failure mode: an invalid scenario or policy configuration is an error
// before anything runs (errors name the field and line); a cancelled context
// stops Run between sessions and returns the context's error. The models
// are simplifications documented in docs/sim.md; numbers are evidence about
// the policies under those models, not predictions for a real fleet.
package sim
