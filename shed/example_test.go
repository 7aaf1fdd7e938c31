package shed_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/shed"
	"github.com/veerhq/veer/tier"
)

func ExampleShedder_Middleware() {
	s, err := shed.New(shed.Config{Registerer: prometheus.NewRegistry()})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /trips/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "trip %s at tier %s", r.PathValue("id"), tier.FromContext(r.Context()))
	})
	h := s.Middleware(mux)

	req := httptest.NewRequest(http.MethodGet, "/trips/42", nil)
	req.Header.Set(tier.Header, "critical")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Body.String())
	fmt.Println(s.Stats()[0].Endpoint)
	// Output:
	// 200 trip 42 at tier critical
	// GET /trips/{id}
}

func ExampleShedder_Acquire() {
	s, _ := shed.New(shed.Config{Registerer: prometheus.NewRegistry(), Limit: shed.LimitConfig{Static: 1}})
	defer s.Close()
	held, _ := s.Acquire(context.Background(), "/pkg.Svc/Get", tier.Critical)
	// The only slot is taken; a caller whose deadline has already passed
	// is dropped instead of queued.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Acquire(ctx, "/pkg.Svc/Get", tier.Sheddable)
	var rj *shed.Rejection
	fmt.Println(errors.Is(err, shed.ErrShed), errors.As(err, &rj) && rj.Reason == shed.ReasonDeadline)
	held.Release()
	// Output: true true
}

// A caller states its time budget in Veer-Timeout-Ms: the request gets that
// deadline from its arrival, the stage drops it when the deadline would pass
// before it could start, and the handler sees the deadline.
func ExampleShedder_Middleware_timeout() {
	s, _ := shed.New(shed.Config{Registerer: prometheus.NewRegistry()})
	defer s.Close()
	h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dl, ok := r.Context().Deadline()
		fmt.Println("deadline:", ok, "within 250ms:", ok && time.Until(dl) <= 250*time.Millisecond)
	}))
	req := httptest.NewRequest(http.MethodGet, "/trips/1", nil)
	req.Header.Set(shed.TimeoutHeader, "250")
	h.ServeHTTP(httptest.NewRecorder(), req)
	// Output: deadline: true within 250ms: true
}

// A refusal names its reason in the Veer-Shed-Reason header, so that a
// proxy can tell a deadline drop (retrying with the same budget is
// pointless) from plain overload without reading the body.
func ExampleShedder_WriteRejection() {
	s, _ := shed.New(shed.Config{Registerer: prometheus.NewRegistry(), Limit: shed.LimitConfig{Static: 1}})
	defer s.Close()
	held, _ := s.Acquire(context.Background(), "/pkg.Svc/Get", tier.Critical)
	defer held.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller's deadline has passed
	_, err := s.Acquire(ctx, "/pkg.Svc/Get", tier.Sheddable)
	rec := httptest.NewRecorder()
	s.WriteRejection(rec, err)
	fmt.Println(rec.Code, rec.Header().Get(shed.ReasonHeader), rec.Header().Get("Retry-After"))
	fmt.Print(rec.Body.String())
	// Output:
	// 503 deadline 1
	// {"error":"overloaded","reason":"deadline","retry_after_seconds":1}
}
