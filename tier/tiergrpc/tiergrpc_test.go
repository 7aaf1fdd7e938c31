package tiergrpc_test

import (
	"context"
	"net"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/veerhq/veer/tier"
	"github.com/veerhq/veer/tier/tiergrpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// seen is what a backend's handler found in its incoming metadata.
type seen struct{ tier, caller string }

// back records the metadata of every call.
type back struct {
	healthpb.UnimplementedHealthServer
	got chan seen
}

func record(ctx context.Context, got chan seen) {
	md, _ := metadata.FromIncomingContext(ctx)
	s := seen{}
	if v := md.Get(tier.MetadataKey); len(v) > 0 {
		s.tier = v[0]
	}
	if v := md.Get(tier.CallerMetadataKey); len(v) > 0 {
		s.caller = v[0]
	}
	got <- s
}

func (b *back) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	record(ctx, b.got)
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (b *back) Watch(_ *healthpb.HealthCheckRequest, ss grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	record(ss.Context(), b.got)
	return ss.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// front calls back from its handlers: Check makes a unary call, Watch opens
// a stream, both with the handler's context.
type front struct {
	healthpb.UnimplementedHealthServer
	next healthpb.HealthClient
	saw  chan tier.Tier
}

func (f *front) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	f.saw <- tier.FromContext(ctx)
	st, err := f.next.Watch(ctx, req)
	if err != nil {
		return nil, err
	}
	return st.Recv()
}

func (f *front) Watch(req *healthpb.HealthCheckRequest, ss grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	f.saw <- tier.FromContext(ss.Context())
	resp, err := f.next.Check(ss.Context(), req)
	if err != nil {
		return err
	}
	return ss.Send(resp)
}

func serve(t *testing.T, svc healthpb.HealthServer, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, svc)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return dial(t, lis.Addr().String())
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// TestPropagationOverRealServers runs client → front → back on loopback:
// the tier the client states reaches back, with front named as the caller,
// through unary and streaming calls alike.
func TestPropagationOverRealServers(t *testing.T) {
	b := &back{got: make(chan seen, 4)}
	backConn := serve(t, b)
	f := &front{saw: make(chan tier.Tier, 4)}
	frontConn := serve(t, f,
		grpc.ChainUnaryInterceptor(tiergrpc.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(tiergrpc.StreamServerInterceptor()))
	// front's client to back propagates.
	lisAddr := backConn.Target()
	f.next = healthpb.NewHealthClient(dial(t, lisAddr,
		grpc.WithChainUnaryInterceptor(tiergrpc.UnaryClientInterceptor("front")),
		grpc.WithChainStreamInterceptor(tiergrpc.StreamClientInterceptor("front"))))

	client := healthpb.NewHealthClient(frontConn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), tier.MetadataKey, "critical", tier.CallerMetadataKey, "app")

	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := <-f.saw; got != tier.Critical {
		t.Fatalf("front's unary handler saw tier %v, want critical", got)
	}
	if got := <-b.got; got != (seen{"critical", "front"}) {
		t.Fatalf("back saw %+v over a stream, want critical from front", got)
	}

	st, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if got := <-f.saw; got != tier.Critical {
		t.Fatalf("front's stream handler saw tier %v, want critical", got)
	}
	if got := <-b.got; got != (seen{"critical", "front"}) {
		t.Fatalf("back saw %+v over a unary call, want critical from front", got)
	}
}

func TestOutboundKeepsExplicitMetadata(t *testing.T) {
	ctx := tier.WithTier(context.Background(), tier.Critical)
	ctx = metadata.AppendToOutgoingContext(ctx, tier.MetadataKey, "sheddable")
	md, _ := metadata.FromOutgoingContext(tiergrpc.Outbound(ctx, "me"))
	if got := md.Get(tier.MetadataKey); len(got) != 1 || got[0] != "sheddable" {
		t.Fatalf("tier metadata %v, want the explicit sheddable only", got)
	}
	if got := md.Get(tier.CallerMetadataKey); len(got) != 1 || got[0] != "me" {
		t.Fatalf("caller metadata %v, want me", got)
	}
	if out := tiergrpc.Outbound(context.Background(), ""); out != context.Background() {
		t.Fatal("Outbound changed a context with nothing to propagate")
	}
	in := tiergrpc.Inbound(context.Background(), metadata.Pairs(tier.MetadataKey, "bogus", tier.CallerMetadataKey, "x"))
	if tier.FromContext(in) != tier.Unset || tier.CallerFromContext(in) != "x" {
		t.Fatal("malformed incoming tier not dropped, or caller lost")
	}
}

func FuzzInbound(f *testing.F) {
	f.Add("critical", "svc")
	f.Add("sheddable-plus", "")
	f.Fuzz(func(t *testing.T, tr, caller string) {
		ctx := tiergrpc.Inbound(context.Background(), metadata.Pairs(tier.MetadataKey, tr, tier.CallerMetadataKey, caller))
		if got := tier.FromContext(ctx); got != tier.Unset && !got.Valid() {
			t.Fatalf("invalid tier %v in context", got)
		}
		if c := tier.CallerFromContext(ctx); len(c) > tier.MaxCallerLen {
			t.Fatalf("caller of %d bytes in context", len(c))
		}
	})
}
