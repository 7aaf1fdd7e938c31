package limitredis_test

import (
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/limit/limitredis"
)

// A fleet of 4 gateways shares one per-tenant limit of 1000 requests/s and
// 200 in flight; with Redis down, each enforces 250/s and 50 in flight.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true, // let the decision timeout cut a hung call
		MaxRetries:            -1,   // fall back instead of retrying
		DialTimeout:           100 * time.Millisecond,
	})
	l, err := limitredis.New(limitredis.Config{
		Instances: 4,
		Limits: limit.Config{Dimensions: []limit.Dimension{
			{Name: "tenant", Default: limit.Limits{Rate: 1000, Burst: 2000, Concurrency: 200}},
		}},
	}, rdb, limitredis.Options{})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	mux := http.NewServeMux()
	_ = limit.Middleware(l, limit.HeaderKeys("X-Tenant"))(mux)
}
