package main

import (
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/config/watch"
	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/dnsserver"
)

// loadRegionsFile fills f.Regions from f.RegionsFile, the routing table
// file of veer control (the one `veer control put routing/table FILE`
// writes to the store), so that the two share one region table: each CIDR
// of each region becomes a row. The file is read strictly and validated as
// control validates the document, its errors naming it and the line; a
// relative path is read from the config file's directory. It is read at
// start and at each reload of the config file (a change of the config
// file, or SIGHUP), and `veer dns` also follows the table file itself
// (regionsFollower).
func (f *dnsFile) loadRegionsFile(cfgPath string) error {
	path := f.regionsPath(cfgPath)
	if path == "" {
		return nil
	}
	var t control.Table
	if err := config.Load(path, &t); err != nil {
		return err
	}
	f.Regions = tableRegions(&t)
	return nil
}

// regionsPath is regions_file resolved against the config file's
// directory; "" without one.
func (f *dnsFile) regionsPath(cfgPath string) string {
	if f.RegionsFile == "" || filepath.IsAbs(f.RegionsFile) {
		return f.RegionsFile
	}
	return filepath.Join(filepath.Dir(cfgPath), f.RegionsFile)
}

// regionsFollower watches the regions_file in force, so that a change of
// veer control's table file alone (the config file unchanged) moves the
// DNS's regions too: each valid version is handed to apply; an invalid one
// is logged and counted by config/watch and the regions in force stay.
type regionsFollower struct {
	opts  watch.Options
	apply func([]dnsserver.Region) error

	mu   sync.Mutex
	path string
	w    *watch.Watcher[control.Table]
}

// follow watches path ("" stops watching); the same path again is a no-op.
// The file's first read is not applied: the config's own load read it.
func (r *regionsFollower) follow(path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if path == r.path {
		return nil
	}
	if r.w != nil {
		r.w.Close()
		r.w, r.path = nil, ""
	}
	if path == "" {
		return nil
	}
	var started atomic.Bool
	w, err := watch.File(path, r.opts, func(t control.Table) error {
		if !started.Load() {
			return nil
		}
		return r.apply(tableRegions(&t))
	})
	if err != nil {
		return err
	}
	started.Store(true)
	r.w, r.path = w, path
	return nil
}

// Close stops watching.
func (r *regionsFollower) Close() { _ = r.follow("") }

// tableRegions lists a routing table's regions as the DNS's rows.
func tableRegions(t *control.Table) []dnsserver.Region {
	var out []dnsserver.Region
	for _, r := range t.Regions {
		for _, c := range r.CIDRs {
			out = append(out, dnsserver.Region{CIDR: c, Region: r.Name})
		}
	}
	return out
}

// validateRegionsFile refuses a regions_file beside another source of
// regions.
func (f dnsFile) validateRegionsFile() error {
	switch {
	case f.RegionsFile == "":
		return nil
	case len(f.Regions) > 0:
		return config.Field("regions_file", "regions and regions_file both set: pick one")
	case f.ControlStore != nil:
		return config.Field("regions_file", "with control_store the regions come from the store's routing table")
	}
	return nil
}
