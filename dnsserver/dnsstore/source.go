package dnsstore

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/dnsserver"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/docs"
)

// ErrNoStore: New was given no store.
var ErrNoStore = errors.New("dnsstore: no store")

// Options wire a Source; the zero value works.
type Options struct {
	// Logger receives invalid documents and store interruptions. Default
	// slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics. Default prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
	// Clock times the re-list backoff. Default clock.Real.
	Clock clock.Clock
	// Backoff is the wait before a re-list after the store failed. Default
	// store.DefaultFollowBackoff.
	Backoff time.Duration
}

// Source follows the zones and access nodes in a store.
type Source struct {
	st   store.Store
	opts Options
	log  *slog.Logger

	updates *prometheus.CounterVec
	resets  prometheus.Counter

	mu sync.Mutex
	// the last good value of each document (nil: absent)
	zones   *zonesDoc
	access  *docs.Access
	regions []dnsserver.Region
}

var _ dnsserver.Source = (*Source)(nil)

// New returns a Source reading st, which stays the caller's to close.
func New(st store.Store, opts Options) (*Source, error) {
	if st == nil {
		return nil, ErrNoStore
	}
	s := &Source{st: st, opts: opts, log: cmpLogger(opts.Logger)}
	s.updates = obs.Register(opts.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "veer_dnsstore_updates_total",
		Help: "Store changes turned into served data (ok) or refused, the last good data kept (invalid).",
	}, []string{"result"}))
	s.resets = obs.Register(opts.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "veer_dnsstore_resets_total",
		Help: "Store reads or watches that failed; the last data keeps serving while the store is re-listed.",
	}))
	for _, r := range []string{"ok", "invalid"} {
		s.updates.WithLabelValues(r)
	}
	return s, nil
}

func cmpLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

// Run implements dnsserver.Source: it follows the three documents until ctx
// ends and calls apply with each new combination. It never fails to start
// (an unreachable store is retried); it returns nil when ctx ends.
func (s *Source) Run(ctx context.Context, apply func(dnsserver.Data) error) error {
	fo := store.FollowOptions{Clock: s.opts.Clock, Backoff: s.opts.Backoff, OnReset: func(err error) {
		s.resets.Inc()
		s.log.Warn("dnsstore: store unavailable, serving the last data", "err", err)
	}}
	var wg sync.WaitGroup
	for _, key := range []string{KeyZones, store.KeyAccess, store.KeyTable} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last int64 = -1
			store.Follow(ctx, s.st, key, fo, func(sn *store.Snapshot) {
				d, ok := sn.Docs[key] // the prefix also matches longer keys
				rev := int64(0)
				if ok {
					rev = d.Revision
				}
				if rev == last {
					return
				}
				last = rev
				s.update(key, d, ok, apply)
			})
		}()
	}
	wg.Wait()
	return nil
}

// update parses the new version of one document and applies the
// combination; an invalid document keeps the last good one.
func (s *Source) update(key string, d store.Doc, present bool, apply func(dnsserver.Data) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	switch key {
	case KeyZones:
		var z *zonesDoc
		if present {
			z, err = parseZones(d.Value)
		}
		if err == nil {
			s.zones = z
		}
	case store.KeyAccess:
		var a *docs.Access
		if present {
			a, err = parseAccess(d.Value)
		}
		if err == nil {
			s.access = a
		}
	case store.KeyTable:
		var r []dnsserver.Region
		if present {
			r, err = parseTable(d.Value)
		}
		if err == nil {
			s.regions = r
		}
	}
	if err != nil {
		s.refuse(key, d.Version, err)
		return
	}
	if s.zones == nil {
		return // nothing to serve yet: the config file's data stays
	}
	data, err := combine(s.zones, s.access, s.regions)
	if err == nil {
		err = apply(data)
	}
	if err != nil {
		s.refuse(key, d.Version, err)
		return
	}
	s.updates.WithLabelValues("ok").Inc()
	s.log.Info("dnsstore: serving", "key", key, "version", d.Version, "zones", len(data.Zones))
}

func (s *Source) refuse(key string, version int64, err error) {
	s.updates.WithLabelValues("invalid").Inc()
	s.log.Warn("dnsstore: document refused, the last good data keeps serving", "key", key, "version", version, "err", err)
}
