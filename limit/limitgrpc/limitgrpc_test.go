package limitgrpc

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/limit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestUnaryResourceExhausted(t *testing.T) {
	l, err := limit.New(limit.Config{Dimensions: []limit.Dimension{
		{Name: "tenant", Default: limit.Limits{Rate: 0.2, Burst: 2}},
		{Name: "method", Default: limit.Limits{Concurrency: 100}},
	}}, limit.Options{Clock: clock.NewManual(time.Now()), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(UnaryServerInterceptor(l, MetadataKeys("tenant", ":method"))))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(ln)
	defer srv.Stop()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "tenant", "acme")
	for i := range 2 {
		if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	var trailer metadata.MD
	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third call: %v, want ResourceExhausted", err)
	}
	if got := trailer.Get("retry-after"); len(got) != 1 || got[0] != "5" {
		t.Fatalf("retry-after trailer %v, want [5]", got)
	}
	if want := "rate limit of tenant reached; retry after 5s"; status.Convert(err).Message() != want {
		t.Fatalf("message %q, want %q", status.Convert(err).Message(), want)
	}
	other := metadata.AppendToOutgoingContext(context.Background(), "tenant", "other")
	if _, err := c.Check(other, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("other tenant: %v", err)
	}
}

func TestStreamHoldsSlot(t *testing.T) {
	l, err := limit.New(limit.Config{Dimensions: []limit.Dimension{
		{Name: "method", Default: limit.Limits{Concurrency: 1}},
	}}, limit.Options{Clock: clock.NewManual(time.Now()), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{}, 4)
	a := notifying{l, released}
	srv := grpc.NewServer(grpc.StreamInterceptor(StreamServerInterceptor(a, MetadataKeys(":method"))))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(ln)
	defer srv.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := healthpb.NewHealthClient(conn)

	ctx1, cancel1 := context.WithCancel(context.Background())
	w1, err := c.Watch(ctx1, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w1.Recv(); err != nil { // the stream is open and admitted
		t.Fatal(err)
	}
	w2, err := c.Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w2.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stream: %v, want ResourceExhausted while the first holds the slot", err)
	}
	// Ending the first stream returns its slot (the server notices the
	// cancellation asynchronously; wait for the release).
	cancel1()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-released:
	case <-timer.C:
		t.Fatal("slot not released within 10 s of the first stream's end")
	}
	ctx3, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	w3, err := c.Watch(ctx3, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w3.Recv(); err != nil {
		t.Fatalf("third stream after release: %v", err)
	}
}

// notifying signals each permit release of an admitted call.
type notifying struct {
	a        limit.Admitter
	released chan struct{}
}

func (n notifying) Admit(ctx context.Context, keys []string) limit.Result {
	r := n.a.Admit(ctx, keys)
	if r.Allowed {
		r.Permit = r.Permit.WithRelease(func() { n.released <- struct{}{} })
	}
	return r
}
