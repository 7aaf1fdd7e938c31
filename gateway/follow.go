package gateway

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/shed"
	"github.com/veerhq/veer/store"
)

// StoreOptions tune FollowStore; the zero value works.
type StoreOptions struct {
	// Clock times the re-list backoff; default clock.Real.
	Clock clock.Clock
	// Backoff is the wait before re-listing after the store went away;
	// default store.DefaultFollowBackoff.
	Backoff time.Duration
	// OnSnapshot, if set, is called after each store snapshot was handled
	// (applied or rejected), with its revision, on the follower's
	// goroutine.
	OnSnapshot func(revision int64)
	// OnRelease, if set, is called after each snapshot of the release
	// documents was handled, with its revision, on that follower's
	// goroutine.
	OnRelease func(revision int64)
	// Name is the gateway's name in the rollout counts it publishes
	// (release.CountsKey); default "<host name>-<admin address>".
	Name string
	// CountsInterval is how often the rollout counts are published;
	// default DefaultCountsInterval.
	CountsInterval time.Duration
}

// overlay is the store's documents in force over the file's config: nil
// fields are absent documents (the file's section applies).
type overlay struct {
	shed   *shed.Config
	limits *limit.Config
	// seen is the revision of each document last handled (0: absent), so
	// that an unchanged document is not re-applied or re-logged.
	seen map[string]int64
}

// over returns file with the documents in force replacing its shed table
// and limits, validated.
func (o overlay) over(file Config) (Config, error) {
	c := file
	if o.shed != nil {
		if !c.Shed.Enabled {
			return c, config.Field("shed.enabled", "the store's %s document needs shedding enabled in the gateway's file (it cannot be turned on at run time)", store.KeyGatewayCriticality)
		}
		c.Shed.Config = *o.shed
	}
	if o.limits != nil {
		c.Limits.Config = *o.limits
	}
	if o.shed == nil && o.limits == nil {
		return c, nil
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("with the store's gateway documents over the file: %w", err)
	}
	return c, nil
}

// FollowStore makes the gateway follow the control plane's documents
// store.KeyGatewayCriticality (shed.Config's shape) and
// store.KeyGatewayLimits (limit.Config's shape) in s until ctx ends; it
// blocks, so run it on its own goroutine.
//
// While a document is present it replaces the file's shed table (the
// shed section but its enabled switch) or the limit.Config part of the
// file's limits (dimensions, max_keys, …; keys, redis and instances stay
// the file's) wholesale; deleting it returns to the file's section. Every
// other field keeps following the file (Apply).
//
// A document that does not decode or validate, or that cannot apply at run
// time (shedding off in the file, limits turned on or off, a dimension
// count that does not match the file's keys), is logged with its key, line
// and field, counted in veer_gateway_store_documents_total{result="invalid"},
// and the last good config stays in force.
//
// It also follows the release documents (release.KeyPrefix+route, a
// release.Rollout as JSON): while one is present its route is served by the
// plan's two clusters only, each request's tenant (Route.TenantHeader)
// going to the version Rollout.Assign names, and every
// StoreOptions.CountsInterval the counts of each running or paused
// rollout's current step are written to release.CountsKey(route, Name).
// When the store cannot be reached
// the gateway keeps serving with the last config, counts
// veer_gateway_store_follow_errors_total, and re-lists until it is back.
func (g *Gateway) FollowStore(ctx context.Context, s store.Store, opts StoreOptions) {
	fo := store.FollowOptions{Clock: opts.Clock, Backoff: opts.Backoff, OnReset: func(err error) {
		g.m.storeErrs.Inc()
		g.log.Warn("control store watch ended; keeping the last config and re-listing", "err", err)
	}}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); g.followReleases(ctx, s, fo, opts.OnRelease) }()
	go func() {
		defer wg.Done()
		g.publishCounts(ctx, s, clock.Or(opts.Clock), g.gatewayName(opts.Name), cmp.Or(opts.CountsInterval, DefaultCountsInterval))
	}()
	store.Follow(ctx, s, store.KeyGatewayPrefix, fo, func(sn *store.Snapshot) {
		g.applyStore(sn)
		if opts.OnSnapshot != nil {
			opts.OnSnapshot(sn.Revision)
		}
	})
	wg.Wait()
}

// applyStore applies the snapshot's gateway documents that changed, each
// on its own: an invalid one is rejected without holding back the other.
func (g *Gateway) applyStore(sn *store.Snapshot) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, key := range []string{store.KeyGatewayCriticality, store.KeyGatewayLimits} {
		d, present := sn.Docs[key]
		if g.ov.seen[key] == d.Revision {
			continue
		}
		g.ov.seen[key] = d.Revision
		next := g.ov
		var err error
		switch key {
		case store.KeyGatewayCriticality:
			next.shed, err = decodeDoc[shed.Config](d, present)
		case store.KeyGatewayLimits:
			next.limits, err = decodeDoc[limit.Config](d, present)
		}
		if err == nil {
			var eff Config
			if eff, err = next.over(g.file); err == nil {
				err = g.swapLocked(eff)
			}
		}
		if err != nil {
			g.m.storeDocs.WithLabelValues(key, "invalid").Inc()
			g.log.Error("store document rejected; the last good config stays in force",
				"key", key, "version", d.Version, "err", err)
			continue
		}
		g.ov = next
		res := "applied"
		if !present {
			res = "removed"
		}
		g.m.storeDocs.WithLabelValues(key, res).Inc()
		g.log.Info("store document "+res, "key", key, "version", d.Version, "revision", d.Revision)
	}
}

// decodeDoc decodes a present document strictly (errors read
// "key:line: field: why"); an absent one is nil.
func decodeDoc[T any](d store.Doc, present bool) (*T, error) {
	if !present {
		return nil, nil
	}
	v := new(T)
	if err := config.Parse(d.Value, d.Key, v); err != nil {
		return nil, err
	}
	return v, nil
}
