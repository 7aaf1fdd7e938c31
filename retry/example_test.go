package retry_test

import (
	"net/http"
	"time"

	"github.com/veerhq/veer/retry"
)

// An HTTP client that retries up to 3 attempts within 2 s, never adding
// more than 20 % retries to its traffic, and never resending a POST that
// may have reached the server unless it carries an Idempotency-Key.
func ExampleTransport() {
	budget, err := retry.NewBudget(retry.BudgetConfig{})
	if err != nil {
		panic(err)
	}
	r, err := retry.New(retry.Config{MaxAttempts: 3, Deadline: 2 * time.Second},
		retry.Options{Name: "payments", Budget: budget})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: &retry.Transport{Retrier: r}}
	req, _ := http.NewRequest(http.MethodPost, "http://payments.internal/charge", nil)
	req.Header.Set(retry.IdempotencyKeyHeader, "order-42")
	_ = client
}
