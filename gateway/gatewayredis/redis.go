// Package gatewayredis shares the gateway's limits between instances
// through Redis (limit/limitredis). It is a sub-package so that package
// gateway does not link a Redis client; cmd/veer wires SharedLimiter into
// gateway.Options.
//
// Failure mode: when Redis fails or stops answering, limitredis decides
// locally with every limit divided by limits.instances (never unlimited) and
// returns to Redis when a probe succeeds.
package gatewayredis

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/limit/limitredis"
)

// DialTimeout bounds connecting to Redis; reads and writes are bounded by
// limitredis's decision timeout through the request context.
const DialTimeout = 200 * time.Millisecond

// SharedLimiter returns a gateway.Options.SharedLimiter that connects to
// l.Redis with short timeouts and no client retries (limitredis falls back
// instead).
func SharedLimiter(reg prometheus.Registerer, log *slog.Logger) func(l gateway.Limits) (limit.Admitter, error) {
	return func(l gateway.Limits) (limit.Admitter, error) {
		rdb := redis.NewClient(&redis.Options{Addr: l.Redis, ContextTimeoutEnabled: true, MaxRetries: -1,
			DialTimeout: DialTimeout, ReadTimeout: time.Second, WriteTimeout: time.Second})
		a, err := limitredis.New(limitredis.Config{Limits: l.Config, Instances: l.Instances}, rdb, limitredis.Options{Registerer: reg, Logger: log})
		if err != nil {
			_ = rdb.Close()
			return nil, err
		}
		return &admitter{Limiter: a, rdb: rdb}, nil
	}
}

// admitter closes the Redis client with the limiter.
type admitter struct {
	*limitredis.Limiter
	rdb *redis.Client
}

func (a *admitter) Close() error {
	err := a.Limiter.Close()
	_ = a.rdb.Close()
	return err
}
