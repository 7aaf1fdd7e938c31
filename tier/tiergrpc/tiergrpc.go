// Package tiergrpc carries a request's criticality tier and caller through
// gRPC: server interceptors copy the incoming veer-criticality and rpc-caller
// metadata into the context (tier.FromContext, tier.CallerFromContext), and
// client interceptors write the context's tier, and this service's name as
// the caller, into outgoing metadata, so that a shedder on the next hop sees
// the tier the request entered with. It is the gRPC twin of tier.Middleware
// and tier.Transport, in its own package so that tier stays stdlib-only.
//
// Contract: interceptors never fail a call. A malformed incoming tier is
// dropped (Unset), as the receiving policy decides the default. Metadata the
// caller already set on the outgoing context wins over the propagated tier.
//
// Failure mode: a hop that does not install the client interceptors stops
// propagation; the next hop then resolves the tier from its own table.
package tiergrpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/veerhq/veer/tier"
)

// Inbound returns ctx enriched with the tier and caller of incoming
// metadata md (metadata.FromIncomingContext).
func Inbound(ctx context.Context, md metadata.MD) context.Context {
	if t, err := tier.FromMetadata(md); err == nil && t != tier.Unset {
		ctx = tier.WithTier(ctx, t)
	}
	if c := tier.CallerFromMetadata(md); c != "" {
		ctx = tier.WithCaller(ctx, c)
	}
	return ctx
}

// Outbound returns ctx with the tier of ctx and self (when not empty) as the
// caller added to its outgoing metadata, unless already set there.
func Outbound(ctx context.Context, self string) context.Context {
	t := tier.FromContext(ctx)
	md, _ := metadata.FromOutgoingContext(ctx)
	var kv []string
	if t.Valid() && len(md.Get(tier.MetadataKey)) == 0 {
		kv = append(kv, tier.MetadataKey, t.String())
	}
	if self != "" && len(md.Get(tier.CallerMetadataKey)) == 0 {
		kv = append(kv, tier.CallerMetadataKey, self)
	}
	if len(kv) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func inbound(ctx context.Context) context.Context {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ctx
	}
	return Inbound(ctx, md)
}

// UnaryServerInterceptor puts the incoming tier and caller into the
// handler's context.
func UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(inbound(ctx), req)
	}
}

// StreamServerInterceptor puts the incoming tier and caller into the
// stream's context.
func StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, &ServerStream{ServerStream: ss, Ctx: inbound(ss.Context())})
	}
}

// UnaryClientInterceptor propagates the context's tier, and self as the
// caller, on outgoing calls.
func UnaryClientInterceptor(self string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(Outbound(ctx, self), method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor propagates the context's tier, and self as the
// caller, on outgoing streams.
func StreamClientInterceptor(self string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(Outbound(ctx, self), desc, cc, method, opts...)
	}
}

// ServerStream is a grpc.ServerStream with a replaced context.
type ServerStream struct {
	grpc.ServerStream
	Ctx context.Context
}

// Context returns the replaced context.
func (s *ServerStream) Context() context.Context { return s.Ctx }

var _ grpc.ServerStream = (*ServerStream)(nil)
