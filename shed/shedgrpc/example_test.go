package shedgrpc_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/shed"
	"github.com/veerhq/veer/shed/shedgrpc"
	"github.com/veerhq/veer/tier"
)

func ExampleServerOptions() {
	s, _ := shed.New(shed.Config{Registerer: prometheus.NewRegistry(), Limit: shed.LimitConfig{Static: 1}})
	defer s.Close()
	srv := grpc.NewServer(shedgrpc.ServerOptions(s)...)
	defer srv.Stop()

	// What a client sees when the shedder refuses a call: here the only
	// slot is taken and the caller gives up while queued.
	held, _ := s.Acquire(context.Background(), "/pkg.Svc/Get", tier.Critical)
	defer held.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Acquire(ctx, "/pkg.Svc/Get", tier.Sheddable)
	st := status.Convert(shedgrpc.Status(err))
	fmt.Println(st.Code(), st.Message(), outcome.FromGRPCCode(uint32(st.Code())))
	// Output: Unavailable shed: deadline overloaded
}
