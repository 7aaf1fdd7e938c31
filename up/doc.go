// Package up is `veer up` and `veer chaos`: the whole system on one
// machine, and each seed's failure played against it for real.
//
// A System (New, Start, Close) runs the control plane in-process (embedded
// store, the demo routing table), the private DNS, two gateways (sites a
// and b, on 127.0.0.2 and 127.0.0.3) and three backend clusters as
// supervised child processes of the same binary, a "public" resolver that
// can hijack, and a population of devices, each running the real client
// SDK (routing.Bootstrap -> lastmile -> failover -> tier) behind its own
// emulated network (internal/netem). One local CA (internal/localca)
// issues every certificate. Watch prints the terminal view; a loopback API
// (/v1/stats, /v1/state) and the state file DATA/up.json describe the
// running system.
//
// Chaos runs Scenarios against that API: each injects one real fault
// (SIGKILL or SIGSTOP of a child, packets dropped with nftables, a
// hijacking resolver), measures the population, and returns a Result whose
// Pass compares the measured figure with the seed's promise.
//
// Contract: Start returns once every device has bootstrapped and sends;
// Close stops the devices, the services and every child (SIGTERM, SIGKILL
// after 5 s), waits for them, and removes a temporary data directory. A
// child that dies while the system runs is started again after
// Config.RestartAfter. Children die with the parent even when it is
// SIGKILLed (Pdeathsig).
//
// Failure mode: a part that does not start (a port taken, a child that
// exits) makes Start return an error naming it and its log file, after
// stopping what had started. A state file that does not parse is an error
// naming it (ReadState); one left by a dead `veer up` is ErrNotRunning.
// Linux only: /proc for the resource figures, Pdeathsig, 127.0.0.2-3.
package up
