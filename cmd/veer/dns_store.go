package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/dnsserver"
	"github.com/veerhq/veer/dnsserver/dnsstore"
	"github.com/veerhq/veer/store"
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
	// AnnounceStore is the control plane's etcd store this server
	// announces itself in (store.KeyDNSServersPrefix: its --metrics
	// listener, where the console reads the access nodes' health); default
	// ControlStore. Without --metrics nothing is announced. Fixed at start.
	AnnounceStore *storeetcd.Config `yaml:"announce_store" json:"announce_store"`
}

// announceStore is where the server announces itself: AnnounceStore, else
// ControlStore, else nowhere (nil).
func (f dnsFile) announceStore() *storeetcd.Config {
	if f.AnnounceStore != nil {
		return f.AnnounceStore
	}
	return f.ControlStore
}

// Validate names the bad field.
func (f dnsFile) Validate() error {
	if err := f.Config.Validate(); err != nil {
		return err
	}
	if err := f.validateRegionsFile(); err != nil {
		return err
	}
	for _, sc := range []struct {
		field string
		c     *storeetcd.Config
	}{{"control_store", f.ControlStore}, {"announce_store", f.AnnounceStore}} {
		if sc.c == nil {
			continue
		}
		if err := sc.c.Validate(); err != nil {
			var fe *storeetcd.FieldError
			if errors.As(err, &fe) {
				return config.Field(sc.field+"."+fe.Field, "%v", fe.Err)
			}
			return config.Field(sc.field, "%v", err)
		}
	}
	return nil
}

// dnsData keeps the data a Source delivered, so that a reload of the
// config file changes the server's settings but not the data it serves.
type dnsData struct {
	mu    sync.Mutex
	srv   *dnsserver.Server
	store *storeetcd.Config // fixed at start
	ann   *storeetcd.Config // announce_store, fixed at start
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
	return d.reloadLocked(f)
}

func (d *dnsData) reloadLocked(f dnsFile) error {
	if !reflect.DeepEqual(f.ControlStore, d.store) {
		return config.Field("control_store", "cannot change while running; restart veer dns")
	}
	if !reflect.DeepEqual(f.AnnounceStore, d.ann) {
		return config.Field("announce_store", "cannot change while running; restart veer dns")
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
// regions_file (one lock: a config reload cannot slip in between).
func (d *dnsData) setRegions(rows []dnsserver.Region) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.last
	f.Regions = rows
	return d.reloadLocked(f)
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

// runAnnounce announces srv's metrics listener (its /metrics and
// dnsserver.NodeHealthPath) in the store sc under store.KeyDNSServersPrefix
// until ctx ends, then deletes the announcement; it returns a stop
// function that waits for that.
func runAnnounce(ctx context.Context, sc *storeetcd.Config, metricsAddr string, log *slog.Logger) (stop func(), err error) {
	st, err := storeetcd.New(*sc, storeetcd.Options{})
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	h, p, _ := net.SplitHostPort(metricsAddr)
	if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() && host != "" {
		h = host
	}
	a := store.Announcement{Name: host + "-" + metricsAddr, Admin: "http://" + net.JoinHostPort(h, p), Started: time.Now().UTC().Truncate(time.Second), PID: os.Getpid()}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := store.Announce(ctx, st, store.KeyDNSServersPrefix+a.Name, a, store.AnnounceOptions{Logger: log, Author: "dns " + a.Name}); err != nil {
			log.Warn("dns: not announced to the control store", "err", err)
		}
	}()
	return func() { cancel(); <-done; st.Close() }, nil
}
