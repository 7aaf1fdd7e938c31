package limitredis_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/limit/limitredis"
	"github.com/veerhq/veer/obs"
)

// A fleet of 4 gateways shares one per-tenant limit of 8 requests per
// 100 s. Here Redis is unreachable (nothing listens on port 1), so the
// first decision falls back to local limits: this instance admits its
// share, 8 ÷ 4 = 2, never "unlimited".
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:1",
		ContextTimeoutEnabled: true, // let the decision timeout cut a hung call
		MaxRetries:            -1,   // fall back instead of retrying
		DialTimeout:           100 * time.Millisecond,
	})
	defer rdb.Close()
	l, err := limitredis.New(limitredis.Config{
		Instances: 4,
		Limits: limit.Config{Dimensions: []limit.Dimension{
			{Name: "tenant", Default: limit.Limits{Rate: 0.08, Burst: 8}},
		}},
	}, rdb, limitredis.Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	admitted := 0
	for range 10 {
		if r := l.Admit(context.Background(), []string{"acme"}); r.Allowed {
			admitted++
		}
	}
	fmt.Println("fallback:", l.InFallback(), "admitted:", admitted)

	// In a server: 429 with Retry-After for rejected requests.
	mux := http.NewServeMux()
	_ = limit.Middleware(l, limit.HeaderKeys("X-Tenant"))(mux)
	// Output:
	// fallback: true admitted: 2
}
