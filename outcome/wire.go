package outcome

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// gRPC status codes, as numbered by the gRPC specification (statuscodes.md).
// The values are part of the wire protocol and never change; this package
// keeps them here so that it does not depend on grpc-go.
const (
	grpcOK                 = 0
	grpcCanceled           = 1
	grpcUnknown            = 2
	grpcInvalidArgument    = 3
	grpcDeadlineExceeded   = 4
	grpcNotFound           = 5
	grpcAlreadyExists      = 6
	grpcPermissionDenied   = 7
	grpcResourceExhausted  = 8
	grpcFailedPrecondition = 9
	grpcAborted            = 10
	grpcOutOfRange         = 11
	grpcUnimplemented      = 12
	grpcInternal           = 13
	grpcUnavailable        = 14
	grpcDataLoss           = 15
	grpcUnauthenticated    = 16
)

// HeaderOutcome names the response header in which WriteHTTP states the
// rejection's kind (Kind.String()), so that a client can tell a gateway's
// "nothing behind me can serve" (a network kind or UpstreamUnavailable) from
// "I shed you" (overloaded) and from an application's own 5xx (no header).
const HeaderOutcome = "Veer-Outcome"

// HealthPath is the well-known path a veer gateway answers itself, for the
// request's Host: 200 when the route for that host has a healthy upstream,
// a 503 written by WriteHTTP (UpstreamUnavailable) when none, 404 when no
// route matches. Client canaries ask it by default (failover), so that
// failover does not depend on what the backends serve.
const HealthPath = "/.well-known/veer/health"

// FromGRPCCode maps a gRPC status code (google.golang.org/grpc/codes.Code
// converted to uint32) to a Kind. Unavailable is Overloaded (the server shed
// the call), ResourceExhausted is Limited, DeadlineExceeded is
// ResponseTimeout, Canceled is ClientCanceled.
func FromGRPCCode(code uint32) Kind {
	switch code {
	case grpcOK:
		return Success
	case grpcCanceled:
		return ClientCanceled
	case grpcDeadlineExceeded:
		return ResponseTimeout
	case grpcResourceExhausted:
		return Limited
	case grpcUnavailable:
		return Overloaded
	case grpcInvalidArgument, grpcNotFound, grpcAlreadyExists, grpcPermissionDenied,
		grpcFailedPrecondition, grpcOutOfRange, grpcUnimplemented, grpcUnauthenticated:
		return ClientError
	default: // Unknown, Aborted, Internal, DataLoss and unassigned codes
		return ServerError
	}
}

// GRPCCode is the status code a server sends for a rejection of kind k:
// Unavailable for Overloaded, ResourceExhausted for Limited.
func GRPCCode(k Kind) uint32 {
	switch k {
	case Success:
		return grpcOK
	case Overloaded, UpstreamUnavailable:
		return grpcUnavailable
	case Limited:
		return grpcResourceExhausted
	case ClientCanceled:
		return grpcCanceled
	case ResponseTimeout, DialCanceled:
		return grpcDeadlineExceeded
	case ClientError:
		return grpcInvalidArgument
	default:
		if k.Network() {
			return grpcUnavailable
		}
		return grpcInternal
	}
}

// HTTPStatus is the status a server sends for a rejection of kind k:
// 503 for Overloaded, 429 for Limited, 504 for timeouts, 502 for other
// network failures towards an upstream.
func HTTPStatus(k Kind) int {
	switch {
	case k == Success:
		return http.StatusOK
	case k == Overloaded || k == UpstreamUnavailable:
		return http.StatusServiceUnavailable
	case k == Limited:
		return http.StatusTooManyRequests
	case k == ClientError:
		return http.StatusBadRequest
	case k == ClientCanceled:
		return 499 // nginx's "client closed request"; nobody reads it
	case k == ResponseTimeout || k == ConnectTimeout || k == DNSTimeout || k == DialCanceled:
		return http.StatusGatewayTimeout
	case k.Network():
		return http.StatusBadGateway
	default:
		return http.StatusInternalServerError
	}
}

// Rejection is the JSON body of a rejection written by WriteHTTP.
type Rejection struct {
	Error             string `json:"error"`
	Reason            string `json:"reason,omitempty"`
	RetryAfterSeconds int    `json:"retry_after_seconds,omitempty"`
}

// WriteHTTP writes the wire form of a rejection: the status for o.Kind, the
// HeaderOutcome header naming o.Kind, a Retry-After header (whole seconds,
// rounded up, at least 1) when o carries a delay or is
// Overloaded/Limited/UpstreamUnavailable, and a small JSON body naming the
// reason.
// This is the one place where outcomes become HTTP responses; the shedding
// and limiting middlewares and the gateway all call it.
func WriteHTTP(w http.ResponseWriter, o Outcome, reason string) {
	status := HTTPStatus(o.Kind)
	if o.Status != 0 {
		status = o.Status
	}
	body := Rejection{Error: o.Kind.String(), Reason: reason}
	if o.RetryAfter > 0 || o.Kind == Overloaded || o.Kind == Limited || o.Kind == UpstreamUnavailable {
		secs := RetryAfterSeconds(o.RetryAfter)
		body.RetryAfterSeconds = secs
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	h := w.Header()
	h.Set(HeaderOutcome, o.Kind.String())
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// RetryAfterSeconds rounds d up to whole seconds, with a minimum of 1, as
// Retry-After requires an integer and 0 invites an immediate retry storm.
func RetryAfterSeconds(d time.Duration) int {
	secs := int((d + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return secs
}
