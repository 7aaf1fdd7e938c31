package retry_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/retry"
)

// An HTTP client that retries up to 3 attempts within 2 s, never adding
// more than 20 % retries to its traffic, and never resending a POST that
// may have reached the server unless it carries an Idempotency-Key. The
// server answers 503 once, then 200.
func ExampleTransport() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "charged")
	}))
	defer srv.Close()

	budget, err := retry.NewBudget(retry.BudgetConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := retry.New(retry.Config{MaxAttempts: 3, Initial: time.Millisecond, Deadline: 2 * time.Second},
		retry.Options{Name: "payments", Budget: budget, Registerer: prometheus.NewRegistry()})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: &retry.Transport{Next: srv.Client().Transport, Retrier: r}}

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/charge", nil)
	req.Header.Set(retry.IdempotencyKeyHeader, "order-42")
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", calls.Load(), "attempts")
	// Output: 200 after 2 attempts
}

// ExampleNew: an invalid policy is an error naming the field, not a silent
// fallback to the default policy.
func ExampleNew() {
	_, err := retry.New(retry.Config{MaxAttempts: -1}, retry.Options{Registerer: prometheus.NewRegistry()})
	fmt.Println(err)
	// Output: max_attempts: -1 (no limit) needs a deadline
}
