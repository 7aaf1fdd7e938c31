// Package shedgrpc adapts a shed.Shedder to gRPC servers: unary and stream
// interceptors that admit or shed each call per method (the endpoint is the
// full method name, "/pkg.Service/Method") and tier, and a
// tap.ServerInHandle that rejects calls of a tier being shed before the
// server spends anything on them.
//
// The tier of a call is its veer-criticality metadata when the caller
// (rpc-caller) may set it, else the Shedder's endpoint × caller table, else
// its default. An admitted call's handler sees the tier and caller in its
// context (tier.FromContext), ready for tiergrpc's client interceptors.
//
// Contract: a shed call fails with codes.Unavailable (outcome.GRPCCode of
// outcome.Overloaded) and a message naming the reason; a client classifies
// it with outcome.FromGRPCCode as Overloaded. The tap handle never blocks
// and never admits: calls it lets through still pass the interceptors.
//
// Failure mode: a stream holds its slot until the handler returns, so
// long-lived streams count against the method's concurrency limit for their
// whole life; give such methods a static limit or leave them unwrapped.
package shedgrpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/shed"
	"github.com/veerhq/veer/tier"
	"github.com/veerhq/veer/tier/tiergrpc"
)

// ReasonKey is the trailer metadata key that carries a shed call's reason
// (shed.Reason: "overload", "tier", "queue_full", "deadline"), the gRPC
// counterpart of shed.ReasonHeader: a deadline drop is told apart from
// plain overload without parsing the status message. Calls refused by the
// tap handle have no trailer (no stream exists); their reason is "tier".
const ReasonKey = "veer-shed-reason"

// Code is the status code of a shed call: Unavailable.
var Code = codes.Code(outcome.GRPCCode(outcome.Overloaded))

// admit resolves the tier of a call to method and admits it.
func admit(ctx context.Context, s *shed.Shedder, method string) (context.Context, shed.Ticket, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	stated, _ := tier.FromMetadata(md)
	caller := tier.CallerFromMetadata(md)
	t := s.Resolve(method, caller, stated)
	tk, err := s.Acquire(ctx, method, t)
	if err != nil {
		s.Hold(ctx, method) // a rejection storm is paced (shed.Shedder.Hold)
		_ = grpc.SetTrailer(ctx, metadata.Pairs(ReasonKey, reasonOf(err)))
		return ctx, tk, Status(err)
	}
	ctx = tier.WithTier(ctx, t)
	if caller != "" {
		ctx = tier.WithCaller(ctx, caller)
	}
	return ctx, tk, nil
}

// Status converts a shed rejection into the gRPC status error a server
// returns: codes.Unavailable with the reason. Status(nil) is nil.
func Status(err error) error {
	if err == nil {
		return nil
	}
	return status.Error(Code, "shed: "+reasonOf(err))
}

func reasonOf(err error) string {
	if rj, ok := err.(*shed.Rejection); ok {
		return rj.Reason.String()
	}
	return shed.ReasonOverload.String()
}

// UnaryServerInterceptor sheds unary calls.
func UnaryServerInterceptor(s *shed.Shedder) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, tk, err := admit(ctx, s, info.FullMethod)
		if err != nil {
			return nil, err
		}
		defer tk.Release()
		return handler(ctx, req)
	}
}

// StreamServerInterceptor sheds streams; an admitted stream holds its slot
// until the handler returns.
func StreamServerInterceptor(s *shed.Shedder) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, tk, err := admit(ss.Context(), s, info.FullMethod)
		if err != nil {
			return err
		}
		defer tk.Release()
		return handler(srv, &tiergrpc.ServerStream{ServerStream: ss, Ctx: ctx})
	}
}

// TapHandle returns a tap.ServerInHandle that rejects, before the stream is
// created, calls whose tier the method is currently shedding on arrival.
func TapHandle(s *shed.Shedder) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		stated, _ := tier.FromMetadata(info.Header)
		t := s.Resolve(info.FullMethodName, tier.CallerFromMetadata(info.Header), stated)
		if err := s.Check(info.FullMethodName, t); err != nil {
			return ctx, Status(err)
		}
		return ctx, nil
	}
}

// ServerOptions returns the options that install shedding on a grpc.Server:
// the tap handle and both interceptors.
func ServerOptions(s *shed.Shedder) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InTapHandle(TapHandle(s)),
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(s)),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(s)),
	}
}
