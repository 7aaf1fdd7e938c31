package dnsserver

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
)

// Source delivers the served Data: what it has now, then every change. The
// file source below watches a YAML file; a source on the control plane's
// store watches its document the same way.
type Source interface {
	// Run calls apply with the current Data, then with each change, until
	// ctx is done. It returns an error only when it cannot start. An apply
	// error means the Data was invalid and not put in force; the source
	// keeps running.
	Run(ctx context.Context, apply func(Data) error) error
}

// FileSource reads Data (the zones, regions keys of a config file) from a
// YAML file and watches it: a change that does not parse or validate is
// logged and counted (veer_config_reloads_total) and the old data stays.
type FileSource struct {
	// Path is the file. Required.
	Path string
	// Logger and Registerer as in Options.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

var _ Source = FileSource{}

// Run implements Source.
func (f FileSource) Run(ctx context.Context, apply func(Data) error) error {
	w, err := config.Watch(f.Path, config.WatchOptions{Logger: f.Logger, Registerer: f.Registerer}, func(d *Data) {
		_ = apply(*d) // the server logs and counts a rejection
	})
	if err != nil {
		return err
	}
	// config.Watch reads the file before its directory watch starts: a
	// change in between would go unseen until the next one. Read it again
	// now that the watch runs (a no-op when nothing changed).
	_ = w.Reload()
	<-ctx.Done()
	return w.Close()
}

// Run serves the Data of src until ctx is done; it blocks. The first Data
// src delivers replaces the config file's.
func (s *Server) Run(ctx context.Context, src Source) error {
	return src.Run(ctx, s.SetData)
}
