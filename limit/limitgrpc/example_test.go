package limitgrpc_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/limit/limitgrpc"
)

// One call per tenant and method at a time: the second concurrent call of
// tenant acme is answered ResourceExhausted before it reaches the handler.
func ExampleUnaryServerInterceptor() {
	l, err := limit.New(limit.Config{Dimensions: []limit.Dimension{
		{Name: "tenant", Default: limit.Limits{Concurrency: 1}},
	}}, limit.Options{Registerer: prometheus.NewRegistry()})
	if err != nil {
		panic(err)
	}
	intercept := limitgrpc.UnaryServerInterceptor(l, limitgrpc.MetadataKeys("tenant"))
	// grpc.NewServer(grpc.UnaryInterceptor(intercept)) in a server; here
	// the interceptor is called directly.
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("tenant", "acme"))
	info := &grpc.UnaryServerInfo{FullMethod: "/fn.Invoker/Invoke"}
	outer := func(ctx context.Context, req any) (any, error) {
		// While the first call runs, a second one arrives.
		_, err := intercept(ctx, req, info, func(context.Context, any) (any, error) { return "ran", nil })
		fmt.Println("second:", status.Code(err), status.Convert(err).Message())
		return "ran", nil
	}
	resp, err := intercept(ctx, nil, info, outer)
	fmt.Println("first:", resp, err)
	// Output:
	// second: ResourceExhausted concurrency limit of tenant reached; retry after 1s
	// first: ran <nil>
}
