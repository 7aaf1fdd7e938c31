// Package lmtest provides the real servers that last-mile tests and
// experiments run on loopback: DNS servers (miekg/dns, UDP and TCP on one
// port) that answer, SERVFAIL, time out, drop UDP or hijack; a test
// certificate authority; access nodes serving HTTP/3, HTTP/2 and HTTP/1.1
// with a switchable QUIC blackhole; a DNS-over-HTTPS endpoint and a
// scheduling-service endpoint speaking the schema of docs/lastmile.md.
//
// Contract: every server listens on 127.0.0.1 with a kernel-chosen port and
// is stopped by its Close method, which waits for its goroutines. Faults are
// switched at run time with atomic setters, safe for concurrent use.
//
// Failure mode: constructors return an error when a socket cannot be opened;
// tests must fail on it, never skip.
package lmtest
