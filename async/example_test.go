package async_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/veerhq/veer/async"
	"github.com/veerhq/veer/outcome"
)

// Decide after attempts that all fail with a 503: the waits of the seed's
// schedule, then failure.
func ExampleDecide() {
	first := time.Unix(0, 0)
	now := first
	o := outcome.Outcome{Kind: outcome.Overloaded, Status: 503}
	for n := 1; ; n++ {
		d := async.Decide(n, first, now, o)
		if d.State != async.Retrying {
			fmt.Printf("attempt %d at %v: %s (%s)\n", n, now.Sub(first), d.State, d.Reason)
			return
		}
		if n <= 3 || n >= 25 {
			fmt.Printf("attempt %d at %v: retry in %v\n", n, now.Sub(first), d.Wait)
		}
		now = now.Add(d.Wait)
	}
	// Output:
	// attempt 1 at 0s: retry in 2s
	// attempt 2 at 2s: retry in 4s
	// attempt 3 at 6s: retry in 8s
	// attempt 25 at 5h14m6s: retry in 20m0s
	// attempt 26 at 5h34m6s: retry in 20m0s
	// attempt 27 at 5h54m6s: failed (overloaded 503 (retry schedule exhausted))
}

// ParseKey accepts a quoted or bare Idempotency-Key and refuses a malformed
// one (the handler's 400).
func ExampleParseKey() {
	for _, v := range []string{`"order-7"`, "order-7", "two words"} {
		k, err := async.ParseKey(http.Header{"Idempotency-Key": {v}})
		fmt.Printf("%q -> %q %v\n", v, k, err)
	}
	// Output:
	// "\"order-7\"" -> "order-7" <nil>
	// "order-7" -> "order-7" <nil>
	// "two words" -> "" async: malformed Idempotency-Key
}

// ParseDelay reads Veer-Delay (a duration or whole seconds) or
// Veer-Not-Before (RFC 3339): the time before which a submission must not
// run; a malformed or too distant one is the handler's 400.
func ExampleParseDelay() {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	for _, h := range []http.Header{
		{async.DelayHeader: {"30s"}},
		{async.NotBeforeHeader: {"2026-12-02T07:00:00Z"}},
		{async.DelayHeader: {"48h"}},
	} {
		at, err := async.ParseDelay(h, now, 24*time.Hour)
		fmt.Println(at.Format(time.TimeOnly), err)
	}
	// Output:
	// 06:00:30 <nil>
	// 07:00:00 <nil>
	// 00:00:00 async: malformed delay: Veer-Delay "48h" is beyond the 24h0m0s maximum
}
