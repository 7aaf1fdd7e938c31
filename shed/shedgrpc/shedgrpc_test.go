package shedgrpc_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/shed"
	"github.com/veerhq/veer/shed/shedgrpc"
	"github.com/veerhq/veer/tier"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	checkMethod = "/grpc.health.v1.Health/Check"
	watchMethod = "/grpc.health.v1.Health/Watch"
)

// gated blocks Check until released and reports the tier each call saw.
type gated struct {
	healthpb.UnimplementedHealthServer
	entered chan tier.Tier
	release chan struct{}
}

func (g *gated) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	g.entered <- tier.FromContext(ctx)
	<-g.release
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (g *gated) Watch(_ *healthpb.HealthCheckRequest, ss grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	g.entered <- tier.FromContext(ss.Context())
	<-g.release
	return ss.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

func setup(t *testing.T) (*shed.Shedder, *gated, healthpb.HealthClient) {
	t.Helper()
	s, err := shed.New(shed.Config{
		Target: time.Millisecond, Interval: 10 * time.Millisecond,
		Limit:      shed.LimitConfig{Static: 1},
		Registerer: prometheus.NewRegistry(), Logger: obs.Discard,
		Endpoints: []shed.EndpointConfig{{Name: checkMethod, Callers: map[string]tier.Tier{"batch": tier.Sheddable}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gated{entered: make(chan tier.Tier, 100), release: make(chan struct{})}
	srv := grpc.NewServer(shedgrpc.ServerOptions(s)...)
	healthpb.RegisterHealthServer(srv, g)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return s, g, healthpb.NewHealthClient(cc)
}

func as(caller, crit string) context.Context {
	kv := []string{tier.CallerMetadataKey, caller}
	if crit != "" {
		kv = append(kv, tier.MetadataKey, crit)
	}
	return metadata.AppendToOutgoingContext(context.Background(), kv...)
}

// TestUnaryShedsLowTierKeepsCritical holds the method's only slot, queues
// sheddable (by table) and critical (by metadata) calls, and checks that
// every sheddable call fails with Unavailable naming a shed reason while
// every critical call is served.
func TestUnaryShedsLowTierKeepsCritical(t *testing.T) {
	_, g, client := setup(t)
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := client.Check(as("trips", "critical"), &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("holder: %v", err)
		}
	})
	if got := <-g.entered; got != tier.Critical {
		t.Fatalf("handler saw tier %v, want critical", got)
	}
	const n = 10
	low := make(chan error, n)
	crit := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := client.Check(as("batch", "critical_plus"), &healthpb.HealthCheckRequest{}) // trusted: states its tier
			crit <- err
		})
		wg.Go(func() {
			var tr metadata.MD
			_, err := client.Check(as("batch", ""), &healthpb.HealthCheckRequest{}, grpc.Trailer(&tr)) // table: sheddable
			if r := tr[shedgrpc.ReasonKey]; len(r) != 1 || "shed: "+r[0] != status.Convert(err).Message() {
				t.Errorf("shed call's trailer %v does not carry the reason of %v", tr, err)
			}
			low <- err
		})
	}
	for range n {
		err := <-low
		st, _ := status.FromError(err)
		if st.Code() != codes.Unavailable || !strings.HasPrefix(st.Message(), "shed: ") {
			t.Errorf("sheddable call: %v, want Unavailable from the shedder", err)
		}
		if outcome.FromGRPCCode(uint32(st.Code())) != outcome.Overloaded {
			t.Errorf("code %v does not classify as overloaded", st.Code())
		}
	}
	close(g.release)
	for range n {
		if err := <-crit; err != nil {
			t.Errorf("critical call: %v", err)
		}
	}
	wg.Wait()
}

// TestStreamShed: a stream holds the Watch method's only slot; a second,
// sheddable_plus stream waits and is shed once the method is overloaded.
func TestStreamShed(t *testing.T) {
	_, g, client := setup(t)
	ctx, cancel := context.WithCancel(as("app", "critical"))
	defer cancel()
	first, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-g.entered; got != tier.Critical {
		t.Fatalf("stream handler saw tier %v, want critical", got)
	}
	second, err := client.Watch(as("app", "sheddable_plus"), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = second.Recv()
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != "shed: overload" {
		t.Fatalf("queued sheddable_plus stream: %v, want Unavailable shed: overload", err)
	}
	close(g.release)
	if _, err := first.Recv(); err != nil {
		t.Fatalf("first stream: %v", err)
	}
}

// TestTapHandle runs in virtual time: once the method has dropped a
// sheddable_plus call, the tap handle refuses sheddable calls before any
// stream exists, and lets critical ones through.
func TestTapHandle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := shed.New(shed.Config{Limit: shed.LimitConfig{Static: 1}, Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		handle := shedgrpc.TapHandle(s)
		call := func(crit string) error {
			_, err := handle(context.Background(), &tap.Info{FullMethodName: watchMethod, Header: metadata.Pairs(tier.MetadataKey, crit)})
			return err
		}
		if err := call("sheddable"); err != nil {
			t.Fatalf("tap rejected before any overload: %v", err)
		}
		hold, err := s.Acquire(context.Background(), watchMethod, tier.Critical)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() {
			_, err := s.Acquire(context.Background(), watchMethod, tier.SheddablePlus)
			done <- err
		}()
		synctest.Wait()
		time.Sleep(250 * time.Millisecond) // the queue stands: overloaded, the waiter is dropped
		if err := <-done; !errors.Is(err, shed.ErrShed) {
			t.Fatalf("queued sheddable_plus: %v, want shed", err)
		}
		err = call("sheddable")
		var st interface{ GRPCStatus() *status.Status }
		if !errors.As(err, &st) || st.GRPCStatus().Code() != codes.Unavailable || st.GRPCStatus().Message() != "shed: tier" {
			t.Fatalf("tap handle: %v, want Unavailable shed: tier", err)
		}
		if err := call("critical"); err != nil {
			t.Fatalf("tap handle rejected a critical call: %v", err)
		}
		hold.Release()
	})
}
