// Package outcomegrpc classifies the result of a gRPC call into an
// outcome.Outcome. It lives apart from package outcome so that users of
// outcome do not import grpc-go.
//
// Contract: Classify(nil) is Success. A status from a server maps through
// outcome.FromGRPCCode; an error that carries no gRPC status (a transport
// failure surfaced before any status) is classified by outcome.ClassifyError.
//
// grpc-go reports a failure to connect as codes.Unavailable, exactly like a
// server that shed the call, and keeps the dial error only in the message
// text. ClassifyCall tells them apart with the call's peer (grpc.Peer call
// option): no peer address means no connection was made, which is a network
// failure (NetworkOther), not an overload.
package outcomegrpc

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/veerhq/veer/outcome"
)

// Classify returns the outcome of a gRPC call that returned err.
func Classify(err error) outcome.Outcome {
	if err == nil {
		return outcome.Outcome{Kind: outcome.Success}
	}
	st, ok := status.FromError(err)
	if !ok {
		return outcome.Outcome{Kind: outcome.ClassifyError(err), Err: err}
	}
	return outcome.Outcome{Kind: outcome.FromGRPCCode(uint32(st.Code())), Err: err}
}

// ClassifyCall is Classify for a call made with the grpc.Peer(p) call
// option: an Unavailable or DeadlineExceeded call that never reached a peer
// is a network failure, not a server's answer.
func ClassifyCall(err error, p *peer.Peer) outcome.Outcome {
	o := Classify(err)
	if p != nil && p.Addr == nil {
		switch o.Kind {
		case outcome.Overloaded:
			o.Kind = outcome.NetworkOther
		case outcome.ResponseTimeout:
			o.Kind = outcome.DialCanceled
		}
	}
	return o
}

// Status returns the gRPC status error a server sends for a rejection of
// kind k with message msg (Unavailable for Overloaded, ResourceExhausted for
// Limited).
func Status(k outcome.Kind, msg string) error {
	return status.Error(codes.Code(outcome.GRPCCode(k)), msg)
}
