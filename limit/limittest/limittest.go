// Package limittest is the contract every limit.Admitter must meet, as a
// test suite: the local limit.Limiter and limit/limitredis both run it.
//
// The suite uses slow rates (one request per 100 s) so that it holds whether
// the implementation's clock is frozen (a manual clock) or real (Redis
// TIME).
package limittest

import (
	"context"
	"testing"
	"time"

	"github.com/veerhq/veer/limit"
)

// NewFunc returns a fresh Admitter enforcing cfg (with no state shared with
// earlier calls).
type NewFunc func(t *testing.T, cfg limit.Config) limit.Admitter

// Contract runs the suite.
func Contract(t *testing.T, newAdmitter NewFunc) {
	ctx := context.Background()
	slow := func(burst, conc int) limit.Limits {
		l := limit.Limits{Concurrency: conc}
		if burst > 0 {
			l.Rate, l.Burst = 0.01, burst
		}
		return l
	}
	count := func(a limit.Admitter, n int, keys ...string) (admitted int, last limit.Result) {
		for range n {
			last = a.Admit(ctx, keys)
			if last.Allowed {
				admitted++
			}
		}
		return admitted, last
	}

	t.Run("burst then rejection naming the dimension", func(t *testing.T) {
		a := newAdmitter(t, limit.Config{Dimensions: []limit.Dimension{{Name: "tenant", Default: slow(3, 0)}}})
		got, last := count(a, 5, "acme")
		if got != 3 {
			t.Fatalf("admitted %d of 5, want the burst 3", got)
		}
		if last.Allowed || last.Dimension != "tenant" || last.Key != "acme" || last.Reason != limit.Rate {
			t.Fatalf("rejection %+v", last)
		}
		// One request per 100 s: the next is due in about 100 s.
		if last.RetryAfter < 90*time.Second || last.RetryAfter > 101*time.Second {
			t.Fatalf("Retry-After %v, want about 100s", last.RetryAfter)
		}
		if o := last.Outcome(); o.Kind.String() != "limited" || o.RetryAfter != last.RetryAfter {
			t.Fatalf("outcome %v", o)
		}
	})

	t.Run("keys are independent", func(t *testing.T) {
		a := newAdmitter(t, limit.Config{Dimensions: []limit.Dimension{{Name: "tenant", Default: slow(1, 0)}}})
		if got, _ := count(a, 3, "a"); got != 1 {
			t.Fatalf("key a: %d", got)
		}
		if got, _ := count(a, 3, "b"); got != 1 {
			t.Fatalf("key b: %d", got)
		}
	})

	t.Run("override and unlimited key", func(t *testing.T) {
		a := newAdmitter(t, limit.Config{Dimensions: []limit.Dimension{{Name: "tenant", Default: slow(1, 0),
			Overrides: map[string]limit.Limits{"big": slow(4, 0), "free": {}}}}})
		if got, _ := count(a, 6, "big"); got != 4 {
			t.Fatalf("override: %d, want 4", got)
		}
		if got, _ := count(a, 6, "free"); got != 6 {
			t.Fatalf("unlimited override: %d, want 6", got)
		}
		if got, _ := count(a, 6, ""); got != 6 {
			t.Fatalf("empty key: %d, want 6 (dimension skipped)", got)
		}
	})

	t.Run("a rejection consumes nothing", func(t *testing.T) {
		a := newAdmitter(t, limit.Config{Dimensions: []limit.Dimension{
			{Name: "tenant", Default: slow(5, 0)},
			{Name: "api", Default: slow(1, 0)},
		}})
		if got, _ := count(a, 1, "t", "x"); got != 1 {
			t.Fatal("first request rejected")
		}
		got, last := count(a, 10, "t", "x")
		if got != 0 || last.Dimension != "api" {
			t.Fatalf("api spent: admitted %d, rejection by %q", got, last.Dimension)
		}
		total := 0
		for _, api := range []string{"p", "q", "r", "s", "u", "v"} {
			n, _ := count(a, 1, "t", api)
			total += n
		}
		if total != 4 {
			t.Fatalf("tenant t admitted %d more, want 4 (5 − 1, untouched by api's rejections)", total)
		}
	})

	t.Run("concurrency slots", func(t *testing.T) {
		a := newAdmitter(t, limit.Config{Dimensions: []limit.Dimension{{Name: "function", Default: slow(0, 2)}}})
		r1, r2 := a.Admit(ctx, []string{"f"}), a.Admit(ctx, []string{"f"})
		if !r1.Allowed || !r2.Allowed {
			t.Fatal("slots refused below the cap")
		}
		r3 := a.Admit(ctx, []string{"f"})
		if r3.Allowed || r3.Reason != limit.Concurrency || r3.Dimension != "function" || r3.RetryAfter <= 0 {
			t.Fatalf("third: %+v, want a concurrency rejection with a Retry-After", r3)
		}
		r1.Permit.Release()
		r1.Permit.Release() // a second release gives nothing back
		r4 := a.Admit(ctx, []string{"f"})
		if !r4.Allowed {
			t.Fatal("released slot not reusable")
		}
		if r5 := a.Admit(ctx, []string{"f"}); r5.Allowed {
			t.Fatal("double release freed two slots")
		}
		r2.Permit.Release()
		r4.Permit.Release()
	})
}
