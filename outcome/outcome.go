// Package outcome classifies what happened to one attempt of a request, once,
// at the edge, so that every policy above (failover, breakers, retries,
// shedding, the simulator) reasons about the same values instead of matching
// error strings.
//
// Contract: Classify and FromGRPCCode are pure and never block. A network
// outcome (Kind.Network) means the request may never have reached a server:
// DNS, connect, TLS/QUIC handshake and timeouts before any response. HTTP
// statuses from a reachable server are never network outcomes.
//
// Failure mode: an error this package does not recognise is classified as
// NetworkOther when it came from the transport, so unknown transport failures
// count against a route rather than being silently treated as success.
package outcome

import (
	"fmt"
	"time"
)

// Kind is the class of an attempt's result.
type Kind uint8

// The kinds. Network kinds come first, between DNSNotFound and NetworkOther.
const (
	Success Kind = iota

	// DNS failures.
	DNSNotFound      // NXDOMAIN / no such host
	DNSTimeout       // resolver did not answer in time
	DNSServerFailure // SERVFAIL, refused, or another resolver error

	// Connection establishment.
	ConnectRefused // RST to SYN (ECONNREFUSED), host/network unreachable
	ConnectTimeout // SYN unanswered until the dial timeout (blackhole)
	DialCanceled   // the request deadline passed while waiting for a connection (see ClassifyProgress)
	TLSHandshake   // TLS handshake failed or timed out (bad certificate, protocol error, no ServerHello)
	QUICHandshake  // QUIC handshake failed or timed out (UDP blocked)

	// After the connection was made.
	ConnectionReset // connection reset or closed before a response (EOF)
	ResponseTimeout // no response headers before the deadline
	NetworkOther    // another transport error

	// Server answered.
	Overloaded  // 503, gRPC Unavailable: the server shed the request
	Limited     // 429, gRPC ResourceExhausted: a rate or concurrency limit
	ServerError // other 5xx, gRPC Internal/Unknown/DataLoss
	ClientError // 4xx other than 429: the request itself is wrong

	// ClientCanceled: the caller gave up (context canceled) before a result.
	ClientCanceled

	// UpstreamUnavailable: a gateway answered, but nothing behind it could
	// serve (every backend dead, frozen, drained or behind an open breaker).
	// On the wire it is a 5xx with the HeaderOutcome header naming this kind
	// or a network kind; Classify reads it back. Unlike Overloaded ("I shed
	// you") it is a failure of the domain: see Unreachable.
	UpstreamUnavailable

	numKinds
)

var kindNames = [numKinds]string{
	Success:          "success",
	DNSNotFound:      "dns_not_found",
	DNSTimeout:       "dns_timeout",
	DNSServerFailure: "dns_server_failure",
	ConnectRefused:   "connect_refused",
	ConnectTimeout:   "connect_timeout",
	DialCanceled:     "dial_canceled",
	TLSHandshake:     "tls_handshake",
	QUICHandshake:    "quic_handshake",
	ConnectionReset:  "connection_reset",
	ResponseTimeout:  "response_timeout",
	NetworkOther:     "network_other",
	Overloaded:       "overloaded",
	Limited:          "limited",
	ServerError:      "server_error",
	ClientError:      "client_error",
	ClientCanceled:   "client_canceled",

	UpstreamUnavailable: "upstream_unavailable",
}

// String returns the snake_case name used in metrics and logs.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind is the inverse of String.
func ParseKind(s string) (Kind, error) {
	for k, n := range kindNames {
		if n == s {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("outcome: unknown kind %q", s)
}

// Kinds returns every kind in order; useful for pre-creating metric series.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

// Network reports whether k is a network failure: the server may not have
// been reached, or it was reached but its answer never arrived.
func (k Kind) Network() bool { return k >= DNSNotFound && k <= NetworkOther }

// Unreachable reports whether k says the domain could not serve the
// request: a network failure on the way to it, or a gateway there that could
// reach nothing behind it (UpstreamUnavailable). Shedding (Overloaded),
// limits (Limited) and an application's own errors are not: the domain is
// up and answering. Client failover counts exactly these kinds.
func (k Kind) Unreachable() bool { return k.Network() || k == UpstreamUnavailable }

// DNS reports whether k is a name-resolution failure.
func (k Kind) DNS() bool { return k >= DNSNotFound && k <= DNSServerFailure }

// NotSent reports whether a request with this outcome certainly never reached
// the upstream application (no connection was established), which makes a
// retry safe for any method.
func (k Kind) NotSent() bool {
	return k >= DNSNotFound && k <= QUICHandshake || k == Overloaded || k == Limited
}

// Outcome is the classified result of one attempt.
type Outcome struct {
	Kind Kind
	// Status is the HTTP status code, or 0 when there was no response.
	Status int
	// RetryAfter is the server's Retry-After hint, 0 if none.
	RetryAfter time.Duration
	// Err is the underlying error, if any. It is informative only.
	Err error
	// Unwritten is set by a transport that knows no byte of the request
	// was written to the connection (for example a connection reset
	// before the request was sent): like a NotSent kind, it makes a retry
	// safe for any method. The Kind stays what the failure was.
	Unwritten bool
}

// NotSent reports whether the request certainly never reached the
// upstream: a NotSent kind, or a transport that reported Unwritten.
func (o Outcome) NotSent() bool { return o.Unwritten || o.Kind.NotSent() }

// OK reports whether the attempt succeeded.
func (o Outcome) OK() bool { return o.Kind == Success }

// Network reports whether the attempt failed in the network.
func (o Outcome) Network() bool { return o.Kind.Network() }

func (o Outcome) String() string {
	s := o.Kind.String()
	if o.Status != 0 {
		s = fmt.Sprintf("%s(%d)", s, o.Status)
	}
	if o.Err != nil {
		s += ": " + o.Err.Error()
	}
	return s
}

// Of returns an Outcome of kind k with no response; a shorthand for the
// simulator and for tests.
func Of(k Kind) Outcome { return Outcome{Kind: k} }
