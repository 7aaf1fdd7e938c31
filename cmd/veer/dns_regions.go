package main

import (
	"path/filepath"

	"github.com/veerhq/veer/config"
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
// file, or SIGHUP).
func (f *dnsFile) loadRegionsFile(cfgPath string) error {
	if f.RegionsFile == "" {
		return nil
	}
	path := f.RegionsFile
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(cfgPath), path)
	}
	var t control.Table
	if err := config.Load(path, &t); err != nil {
		return err
	}
	f.Regions = tableRegions(&t)
	return nil
}

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
