// Package h1 is the gateway's HTTP/1 wire engine: the parts that know
// HTTP/1.1 bytes and connections and nothing of routes, clusters or guards.
//
//   - Listener sits between a TCP listener and the servers: it frames each
//     HTTP/1.x connection (request smuggling refused with a 400 before
//     the server parses a byte that could desynchronise it; see
//     framing.go), terminates TLS on a goroutine of its own, and parks idle
//     keep-alive connections without a goroutine or buffers (accept.go,
//     park_unix.go). ConnState is the hook a server calls for it (Server
//     does; net/http's http.Server takes it as its ConnState).
//   - Server serves the HTTP/1.x connections Listener accepts, in place of
//     net/http's server, whose per-request costs (a background read of
//     every request, a header clone and sort, textproto's allocations) were
//     a quarter of the gateway's CPU: the same parsing rules (FuzzParseHead
//     holds them to http.ReadRequest), response framing, timeouts,
//     Shutdown, Hijack and ResponseController support (server.go,
//     server_req.go, server_resp.go). Connections that speak HTTP/2 (h2 by
//     ALPN, prior-knowledge h2c) go to net/http's HTTP/2 server through a
//     ConnQueue.
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
// and reported through the listener's onRefuse callback; a head the
// server cannot parse gets net/http's answer (400, 431, 501, 505) and a
// close; a handler's panic closes its connection without sending what it
// buffered; an attempt past its
// deadline fails with ErrTryTimeout and its connection is closed, never
// pooled; a response head over MaxResponseHead fails with ErrHeadTooLarge.
package h1
