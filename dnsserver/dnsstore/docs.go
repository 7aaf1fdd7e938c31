package dnsstore

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
	"go.yaml.in/yaml/v3"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/dnsserver"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/docs"
)

// KeyZones holds the zones and region table (dnsserver.Data's shape,
// access domains without nodes): store.KeyZones. The Source also reads
// store.KeyAccess (the nodes, docs.Access) and store.KeyTable (the regions,
// when dns/zones has none).
const KeyZones = store.KeyZones

// zonesDoc is the KeyZones document.
type zonesDoc struct {
	Zones   []dnsserver.Zone   `yaml:"zones" json:"zones"`
	Regions []dnsserver.Region `yaml:"regions" json:"regions"`
}

// placeholder stands in for the nodes while a zones document is validated
// on its own; it never reaches the server.
var placeholder = []dnsserver.Node{{Addr: "192.0.2.1"}}

// Validate checks everything but the nodes, naming the field.
func (z zonesDoc) Validate() error {
	d := dnsserver.Data{Zones: slices.Clone(z.Zones), Regions: z.Regions}
	for i := range d.Zones {
		acc := slices.Clone(d.Zones[i].Access)
		for j := range acc {
			if len(acc[j].Nodes) > 0 {
				return config.Field(fmt.Sprintf("zones[%d].access[%d].nodes", i, j), "not allowed: nodes come from %s", store.KeyAccess)
			}
			acc[j].Nodes = placeholder
		}
		d.Zones[i].Access = acc
	}
	return d.Validate()
}

// tableDoc is the part of the routing table the DNS uses, leniently.
type tableDoc struct {
	Regions []struct {
		Name  string   `yaml:"name"`
		CIDRs []string `yaml:"cidrs"`
	} `yaml:"regions"`
}

func parseZones(v []byte) (*zonesDoc, error) {
	var z zonesDoc
	if err := config.Parse(v, KeyZones, &z); err != nil {
		return nil, err
	}
	return &z, nil
}

// parseAccess decodes the access document leniently (docs.Access: the
// control plane validated it strictly, and a newer control plane may add
// fields), checking only the addresses the DNS answers with.
func parseAccess(v []byte) (*docs.Access, error) {
	var a docs.Access
	if err := yaml.Unmarshal(v, &a); err != nil {
		return nil, &config.ParseError{File: store.KeyAccess, Err: err}
	}
	check := func(f string, ns []docs.AccessNode) error {
		for i, n := range ns {
			if _, err := netip.ParseAddrPort(n.Addr); err != nil {
				return config.Field(fmt.Sprintf("%s[%d].addr", f, i), "%q: want ip:port", n.Addr)
			}
		}
		return nil
	}
	err := check("default", a.Default)
	for r, ns := range a.Regions {
		if err == nil {
			err = check("regions."+r, ns)
		}
	}
	if err != nil {
		return nil, config.Locate(err, store.KeyAccess, v)
	}
	return &a, nil
}

func parseTable(v []byte) ([]dnsserver.Region, error) {
	var t tableDoc
	if err := yaml.Unmarshal(v, &t); err != nil {
		return nil, &config.ParseError{File: store.KeyTable, Err: err}
	}
	var out []dnsserver.Region
	for _, r := range t.Regions {
		for _, c := range r.CIDRs {
			out = append(out, dnsserver.Region{CIDR: c, Region: r.Name})
		}
	}
	return out, nil
}

// combine builds the served Data: each access domain of z gets the nodes of
// a that serve it. regions are used when z has none.
func combine(z *zonesDoc, a *docs.Access, regions []dnsserver.Region) (dnsserver.Data, error) {
	d := dnsserver.Data{Zones: slices.Clone(z.Zones), Regions: z.Regions}
	if len(z.Regions) == 0 {
		d.Regions = regions
	}
	for i := range d.Zones {
		origin := strings.ToLower(dns.Fqdn(d.Zones[i].Origin))
		acc := slices.Clone(d.Zones[i].Access)
		for j := range acc {
			domain := strings.TrimSuffix(absName(acc[j].Name, origin), ".")
			acc[j].Nodes = nodesFor(a, domain)
			if len(acc[j].Nodes) == 0 {
				return dnsserver.Data{}, config.Field(fmt.Sprintf("zones[%d].access[%d]", i, j), "%s has no node for %s", store.KeyAccess, domain)
			}
		}
		d.Zones[i].Access = acc
	}
	return d, nil
}

// nodesFor lists the up nodes of a serving domain, or all of them when
// none is up (fail open).
func nodesFor(a *docs.Access, domain string) []dnsserver.Node {
	if a == nil {
		return nil
	}
	var up, all []dnsserver.Node
	add := func(region string, ns []docs.AccessNode) {
		for _, n := range ns {
			if len(n.Domains) > 0 && !slices.ContainsFunc(n.Domains, func(d string) bool {
				return strings.EqualFold(strings.TrimSuffix(d, "."), domain)
			}) {
				continue
			}
			ap, err := netip.ParseAddrPort(n.Addr)
			if err != nil {
				continue // parseAccess refused it already
			}
			dn := dnsserver.Node{Addr: ap.Addr().Unmap().String(), Region: region, Weight: max(n.Weight, 1)}
			all = append(all, dn)
			if !n.Down {
				up = append(up, dn)
			}
		}
	}
	for _, r := range slices.Sorted(maps.Keys(a.Regions)) {
		add(r, a.Regions[r])
	}
	add("", a.Default)
	if len(up) == 0 {
		return all
	}
	return up
}

// absName is the access domain's absolute name ("@" is the origin).
func absName(name, origin string) string {
	switch {
	case name == "@":
		return origin
	case strings.HasSuffix(name, "."):
		return strings.ToLower(name)
	}
	return strings.ToLower(name + "." + origin)
}

// ValidateZones checks a dns/zones document as the Source will read it;
// errors read "dns/zones:line: field: problem". The control plane's admin
// API runs it before writing the document (cmd/veer wires it).
func ValidateZones(v []byte) error {
	_, err := parseZones(v)
	return err
}
