// Package limitgrpc adapts limit to gRPC servers: unary and stream
// interceptors that admit each call through a limit.Admitter and answer
// ResourceExhausted (outcome.GRPCCode(outcome.Limited)) with the rejecting
// dimension in the message and a "retry-after" trailer in whole seconds. It
// lives apart from limit so that users of limit do not pull in gRPC.
//
// Failure mode: a call rejected by the limiter never reaches the handler; an
// admitted call's permit is released when the handler returns.
package limitgrpc

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/outcome/outcomegrpc"
)

// KeyFunc fills keys for a call to fullMethod: slot i is the call's key in
// dimension i of the Admitter's config. keys has limit.MaxDimensions slots,
// all "" on entry; slots past the config's dimensions are ignored.
type KeyFunc func(ctx context.Context, fullMethod string, keys []string)

// MetadataKeys returns a KeyFunc reading dimension i from incoming metadata
// key names[i]; the special name ":method" takes the full method name.
// Values longer than 256 bytes are ignored.
func MetadataKeys(names ...string) KeyFunc {
	return func(ctx context.Context, method string, keys []string) {
		md, _ := metadata.FromIncomingContext(ctx)
		for i, n := range names {
			if i >= len(keys) || n == "" {
				continue
			}
			if n == ":method" {
				keys[i] = method
				continue
			}
			if v := md.Get(n); len(v) > 0 && len(v[0]) <= 256 {
				keys[i] = v[0]
			}
		}
	}
}

func admit(ctx context.Context, a limit.Admitter, kf KeyFunc, method string) (limit.Result, error) {
	var buf [limit.MaxDimensions]string
	ks := buf[:]
	kf(ctx, method, ks)
	res := a.Admit(ctx, ks)
	if res.Allowed {
		return res, nil
	}
	o := res.Outcome()
	secs := outcome.RetryAfterSeconds(o.RetryAfter)
	_ = grpc.SetTrailer(ctx, metadata.Pairs("retry-after", strconv.Itoa(secs)))
	return res, outcomegrpc.Status(o.Kind, fmt.Sprintf("%s limit of %s reached; retry after %ds", res.Reason, res.Dimension, secs))
}

// UnaryServerInterceptor limits unary calls.
func UnaryServerInterceptor(a limit.Admitter, kf KeyFunc) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		res, err := admit(ctx, a, kf, info.FullMethod)
		if err != nil {
			return nil, err
		}
		defer res.Permit.Release()
		return handler(ctx, req)
	}
}

// StreamServerInterceptor limits streams; a stream holds its concurrency
// slots until it ends.
func StreamServerInterceptor(a limit.Admitter, kf KeyFunc) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		res, err := admit(ss.Context(), a, kf, info.FullMethod)
		if err != nil {
			return err
		}
		defer res.Permit.Release()
		return handler(srv, ss)
	}
}
