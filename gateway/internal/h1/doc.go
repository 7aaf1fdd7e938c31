// Package h1 is the gateway's HTTP/1 wire engine: the parts that know
// HTTP/1.1 bytes and connections and nothing of routes, clusters or guards.
//
//   - Listener sits between a TCP listener and net/http: it frames each
//     HTTP/1.x connection (request smuggling refused with a 400 before
//     net/http parses a byte that could desynchronise it; see framing.go),
//     terminates TLS on a goroutine of its own, and parks idle keep-alive
//     connections without a goroutine or buffers (accept.go, park_unix.go).
//     ConnState is the http.Server hook it needs.
//   - Client is an HTTP/1.1 upstream client whose request goroutine writes
//     the request and reads the answer itself, on pooled connections that
//     are peeked before reuse (h1client.go, h1alive_unix.go); it writes
//     requests with a writer of its own (writereq.go: net/http's framing,
//     no formatting or sorting, a field it cannot write as it is refused
//     with ErrInvalidRequest); what it does not handle goes to an
//     http.Transport.
//   - CountWrites and WatchWrites tell whether a failed attempt wrote any
//     byte of its request (ErrUnwritten for the Client's own attempts), the
//     fact that makes a retry safe for any method.
//
// Contract: nothing here blocks the accepting goroutine; a connection in a
// handshake or parked is closed by Listener.Close; a Client connection goes
// back to its pool only after its response was read to the end and neither
// side asked to close.
//
// Failure mode: a stream that cannot be framed is refused (400 and close)
// and reported through the listener's onRefuse callback; an attempt past its
// deadline fails with ErrTryTimeout and its connection is closed, never
// pooled; a response head over MaxResponseHead fails with ErrHeadTooLarge.
package h1
