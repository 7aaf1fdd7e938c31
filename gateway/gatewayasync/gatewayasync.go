// Package gatewayasync wires the gateway's async queue to JetStream
// (async/asyncnats), so that package gateway links no NATS code:
//
//	opts.AsyncEngine = gatewayasync.Engine(logger)
//
// Contract: the engine is opened once, at gateway.New, from the gateway's
// async section (its store directory defaulting to data_dir/async).
// Failure mode: an engine that cannot start (an unreachable external
// cluster, a store directory nats-server cannot open) makes gateway.New
// fail with an error naming the async section; nothing is served.
package gatewayasync

import (
	"log/slog"

	"github.com/veerhq/veer/async"
	"github.com/veerhq/veer/async/asyncnats"
	"github.com/veerhq/veer/gateway"
)

// Engine returns the gateway's AsyncEngineFunc over asyncnats.
func Engine(log *slog.Logger) gateway.AsyncEngineFunc {
	return func(cfg async.Config) (async.Engine, error) {
		return asyncnats.Open(cfg, asyncnats.Options{Logger: log, Name: "veer-gateway"})
	}
}
