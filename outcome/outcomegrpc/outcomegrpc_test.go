package outcomegrpc_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/outcome/outcomegrpc"
)

// rejecting answers every health check with the given status.
type rejecting struct {
	healthpb.UnimplementedHealthServer
	err error
}

func (r rejecting) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return nil, r.err
}

func serve(t *testing.T, h healthpb.HealthServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, h)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

func call(t *testing.T, addr string) outcome.Outcome {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var p peer.Peer
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
	if plain := outcomegrpc.Classify(err); plain.Kind != outcome.FromGRPCCode(uint32(status.Code(err))) {
		t.Errorf("Classify(%v) = %v", err, plain)
	}
	return outcomegrpc.ClassifyCall(err, &p)
}

func TestClassifyRealCalls(t *testing.T) {
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	tests := []struct {
		name string
		addr string
		want outcome.Kind
	}{
		{"ok", serve(t, health.NewServer()), outcome.Success},
		{"shed", serve(t, rejecting{err: outcomegrpc.Status(outcome.Overloaded, "overloaded")}), outcome.Overloaded},
		{"limited", serve(t, rejecting{err: outcomegrpc.Status(outcome.Limited, "tenant")}), outcome.Limited},
		{"internal", serve(t, rejecting{err: status.Error(codes.Internal, "boom")}), outcome.ServerError},
		{"refused (no peer)", closedAddr, outcome.NetworkOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := call(t, tt.addr); got.Kind != tt.want {
				t.Fatalf("Classify = %v, want %v", got, tt.want)
			}
		})
	}
}
