package outcome

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"syscall"
	"time"
)

// Classifier is implemented by errors that know their own kind. Transports
// built on other stacks (QUIC, a custom dialer) wrap their errors in a type
// implementing it, or use Wrap, so that Classify needs no knowledge of them.
type Classifier interface {
	OutcomeKind() Kind
}

// Error is an error tagged with its Kind.
type Error struct {
	Kind Kind
	Err  error
}

// Wrap tags err with kind k. Classify returns k for any error chain that
// contains the result.
func Wrap(k Kind, err error) error { return &Error{Kind: k, Err: err} }

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Kind.String()
	}
	return e.Kind.String() + ": " + e.Err.Error()
}
func (e *Error) Unwrap() error     { return e.Err }
func (e *Error) OutcomeKind() Kind { return e.Kind }

// Classify turns the result of an HTTP round trip into an Outcome. With a
// non-nil err the response is ignored (net/http never returns both).
// Retry-After dates are resolved against the wall clock; use
// ClassifyAt for a virtual clock.
func Classify(resp *http.Response, err error) Outcome {
	return ClassifyAt(resp, err, time.Now())
}

// ClassifyAt is Classify with an explicit current time.
func ClassifyAt(resp *http.Response, err error, now time.Time) Outcome {
	if err != nil {
		return Outcome{Kind: ClassifyError(err), Err: err}
	}
	if resp == nil {
		return Outcome{Kind: NetworkOther, Err: errors.New("outcome: nil response and nil error")}
	}
	o := Outcome{Kind: FromHTTPStatus(resp.StatusCode), Status: resp.StatusCode}
	if resp.StatusCode >= 500 && upstreamDown(resp.Header) {
		o.Kind = UpstreamUnavailable
	}
	if o.Kind == Overloaded || o.Kind == Limited || o.Kind == UpstreamUnavailable {
		o.RetryAfter, _ = ParseRetryAfter(resp.Header.Get("Retry-After"), now)
	}
	return o
}

// upstreamDown reports whether a gateway's 5xx says it reached nothing
// behind it: HeaderOutcome names a network kind or UpstreamUnavailable. A
// header naming overloaded (shed) or nothing (the application's own 5xx)
// is not.
func upstreamDown(h http.Header) bool {
	v := h["Veer-Outcome"]
	if len(v) == 0 {
		return false
	}
	k, err := ParseKind(v[0])
	return err == nil && k.Unreachable()
}

// FromHTTPStatus maps a status code from a reachable server to a Kind.
func FromHTTPStatus(code int) Kind {
	switch {
	case code == http.StatusTooManyRequests:
		return Limited
	case code == http.StatusServiceUnavailable:
		return Overloaded
	case code >= 500:
		return ServerError
	case code >= 400:
		return ClientError
	default:
		return Success
	}
}

// ClassifyError classifies a transport error (a dial, TLS, DNS or read
// failure, usually wrapped in *url.Error and *net.OpError).
func ClassifyError(err error) Kind {
	if err == nil {
		return Success
	}
	var c Classifier
	if errors.As(err, &c) {
		return c.OutcomeKind()
	}
	if errors.Is(err, context.Canceled) {
		return ClientCanceled
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		switch {
		case dnsErr.IsNotFound:
			return DNSNotFound
		case dnsErr.IsTimeout:
			return DNSTimeout
		default:
			return DNSServerFailure
		}
	}
	if isTLS(err) || isHTTPTLSTimeout(err) {
		return TLSHandshake
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		switch {
		case errors.Is(err, syscall.ECONNREFUSED),
			errors.Is(err, syscall.ECONNRESET), // reset during the handshake: nothing was sent
			errors.Is(err, syscall.EHOSTUNREACH),
			errors.Is(err, syscall.ENETUNREACH):
			return ConnectRefused
		case op.Timeout():
			// The dialer's own timeout and a context deadline both end
			// here as "i/o timeout"; either way the SYN went unanswered.
			// net/http reports a request deadline that passes while it
			// waits for a pooled or new connection as a bare
			// context.DeadlineExceeded instead; ClassifyProgress tells
			// that case apart.
			return ConnectTimeout
		}
		return NetworkOther
	}
	switch {
	case errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF):
		return ConnectionReset
	case errors.Is(err, context.DeadlineExceeded):
		return ResponseTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ResponseTimeout
	}
	return NetworkOther
}

// isHTTPTLSTimeout reports whether err holds net/http's TLS handshake
// timeout (Transport.TLSHandshakeTimeout): TCP connected, the handshake did
// not finish, so the request was never sent. net/http exports neither the
// type nor a sentinel, and it is a net.Error with Timeout() true, which
// would otherwise read as a response timeout; its type is matched by name
// (package and identifier, never the message). The classifier's real-socket
// test fails if a Go release renames it.
func isHTTPTLSTimeout(err error) bool {
	for err != nil {
		if t := reflect.TypeOf(err); t.PkgPath() == "net/http" && t.Name() == "tlsHandshakeTimeoutError" {
			return true
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				if isHTTPTLSTimeout(e) {
					return true
				}
			}
			return false
		}
		err = errors.Unwrap(err)
	}
	return false
}

func isTLS(err error) bool {
	var (
		cv    *tls.CertificateVerificationError
		alert tls.AlertError
		rh    tls.RecordHeaderError
		ua    x509.UnknownAuthorityError
		hn    x509.HostnameError
		ci    x509.CertificateInvalidError
		ech   *tls.ECHRejectionError
	)
	return errors.As(err, &cv) || errors.As(err, &alert) || errors.As(err, &rh) ||
		errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) || errors.As(err, &ech)
}

// ParseRetryAfter parses a Retry-After header value: delay-seconds or an
// HTTP-date (RFC 9110 section 10.2.3). It reports false for an empty or
// malformed value; a date in the past yields 0, true.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		d = 0
	}
	return d, true
}
