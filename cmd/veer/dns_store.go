package main

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/dnsserver"
	"github.com/veerhq/veer/dnsserver/dnsstore"
	"github.com/veerhq/veer/store/storeetcd"
)

// dnsFile is `veer dns --config`'s file: the server's config and,
// optionally, the control plane's store to serve the data of.
type dnsFile struct {
	dnsserver.Config `yaml:",inline"`
	// ControlStore, when set, serves the zones (document dns/zones) and
	// access nodes (access/nodes, the scheduling API's) of the control
	// plane's etcd store, followed as they change, instead of the file's
	// zones and regions. Default none. Fixed at start.
	ControlStore *storeetcd.Config `yaml:"control_store" json:"control_store"`
	// RegionsFile, when set, is veer control's routing table file, whose
	// regions replace the regions section (dns_regions.go). Default none.
	RegionsFile string `yaml:"regions_file" json:"regions_file"`
}

// Validate names the bad field.
func (f dnsFile) Validate() error {
	if err := f.Config.Validate(); err != nil {
		return err
	}
	if err := f.validateRegionsFile(); err != nil {
		return err
	}
	if f.ControlStore == nil {
		return nil
	}
	if err := f.ControlStore.Validate(); err != nil {
		var fe *storeetcd.FieldError
		if errors.As(err, &fe) {
			return config.Field("control_store."+fe.Field, "%v", fe.Err)
		}
		return config.Field("control_store", "%v", err)
	}
	return nil
}

// dnsData keeps the data a Source delivered, so that a reload of the
// config file changes the server's settings but not the data it serves.
type dnsData struct {
	mu    sync.Mutex
	srv   *dnsserver.Server
	store *storeetcd.Config // fixed at start
	data  *dnsserver.Data   // what the source delivered last; nil: none yet
	last  dnsFile           // the file config in force, regions_file's rows included
}

// set is the Source's apply.
func (d *dnsData) set(data dnsserver.Data) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.srv.SetData(data); err != nil {
		return err
	}
	d.data = &data
	return nil
}

// reload applies a changed config file.
func (d *dnsData) reload(f dnsFile) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !reflect.DeepEqual(f.ControlStore, d.store) {
		return config.Field("control_store", "cannot change while running; restart veer dns")
	}
	c := f.Config
	if d.data != nil {
		c.Data = *d.data
	}
	if err := d.srv.Apply(c); err != nil {
		return err
	}
	d.last = f
	return nil
}

// setRegions applies the config in force with the regions of a changed
// regions_file.
func (d *dnsData) setRegions(rows []dnsserver.Region) error {
	d.mu.Lock()
	f := d.last
	d.mu.Unlock()
	f.Regions = rows
	return d.reload(f)
}

// runStoreSource follows the control plane's etcd store until ctx ends; it
// returns a stop function that waits for it.
func runStoreSource(ctx context.Context, d *dnsData, log *slog.Logger, reg prometheus.Registerer) (stop func(), err error) {
	st, err := storeetcd.New(*d.store, storeetcd.Options{})
	if err != nil {
		return nil, err
	}
	src, err := dnsstore.New(st, dnsstore.Options{Logger: log, Registerer: reg})
	if err != nil {
		st.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = src.Run(ctx, d.set)
	}()
	return func() { cancel(); <-done; st.Close() }, nil
}
