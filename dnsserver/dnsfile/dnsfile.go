// Package dnsfile is the file Source of dnsserver: it reads the served Data
// (the zones and regions keys) from a YAML or JSON file and watches it
// (config/watch), so that `veer dns --data FILE` serves what an operator or
// a deploy tool writes there.
//
// Failure mode: a change that does not parse or validate, or that the
// server rejects, is logged with its file:line and counted
// (veer_config_reloads_total{result="invalid"}); the old data keeps serving.
// A sub-package so that dnsserver's core does not link fsnotify.
package dnsfile

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config/watch"
	"github.com/veerhq/veer/dnsserver"
)

// Source watches one file of dnsserver.Data.
type Source struct {
	// Path is the file. Required.
	Path string
	// Logger receives reload results. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives veer_config_reloads_total. Default
	// prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
}

var _ dnsserver.Source = Source{}

// Run implements dnsserver.Source: it returns the initial load's error, or
// nil when ctx ends.
func (s Source) Run(ctx context.Context, apply func(dnsserver.Data) error) error {
	w, err := watch.File(s.Path, watch.Options{Name: "dns-data", Logger: s.Logger, Registerer: s.Registerer}, apply)
	if err != nil {
		return err
	}
	// The watcher reads the file before its directory watch starts: a
	// change in between would go unseen until the next one. Read it again
	// now that the watch runs (a no-op when nothing changed).
	_ = w.Reload()
	<-ctx.Done()
	return w.Close()
}
