package control

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/routing"
	"github.com/veerhq/veer/store"
)

// Document keys in the store: the control plane's names for store's keys
// (store/keys.go, where every key is defined once).
const (
	// KeyTable holds the routing Table.
	KeyTable = store.KeyTable
	// KeyState holds the sites' and clusters' State (playbooks).
	KeyState = store.KeyState
	// KeyEmergency holds the Emergency overrides.
	KeyEmergency = store.KeyEmergency
	// KeyAccess holds the scheduling API's Access nodes.
	KeyAccess = store.KeyAccess
	// KeyWhitelists prefixes the Whitelist documents named by rules.
	KeyWhitelists = store.KeyWhitelists
	// KeyCriticality holds the criticality table published to gateways
	// (shed.Config's shape).
	KeyCriticality = store.KeyGatewayCriticality
	// KeyLimits holds the limits published to gateways (limit.Config's
	// shape).
	KeyLimits = store.KeyGatewayLimits
)

// Routing defaults.
const (
	// DefaultAnswerTTL is an answer's ttl_seconds when the table says none.
	DefaultAnswerTTL = 3600
	// Slots is the size of the hash bucket table: a bucket rule's share is
	// a range of slots, so 0.01 % steps.
	Slots = 10000
	// maxRules bounds a table's rules.
	maxRules = 10000
)

// Table is the routing rule set (document KeyTable). Rules apply in this
// order: emergency override, whitelist rules, bucket rules (each kind in
// its listed order), the region's site, DefaultDomain.
type Table struct {
	// DefaultDomain answers when no site can (required): seed 004's "wap"
	// domain.
	DefaultDomain string `json:"default_domain" yaml:"default_domain"`
	// TTLSeconds is the answers' ttl_seconds; default DefaultAnswerTTL.
	TTLSeconds int `json:"ttl_seconds,omitempty" yaml:"ttl_seconds,omitempty"`
	// Salt is mixed into the bucket hash; changing it reshuffles every
	// bucket, so it is set once.
	Salt string `json:"salt,omitempty" yaml:"salt,omitempty"`
	// Regions map client addresses to a default site, longest prefix first.
	Regions []Region `json:"regions,omitempty" yaml:"regions,omitempty"`
	// DefaultSite serves addresses in no region; empty: DefaultDomain.
	DefaultSite string `json:"default_site,omitempty" yaml:"default_site,omitempty"`
	// Sites are the data centres.
	Sites []Site `json:"sites,omitempty" yaml:"sites,omitempty"`
	// Rules pick users for a site.
	Rules []Rule `json:"rules,omitempty" yaml:"rules,omitempty"`
}

// Region is a set of client address ranges.
type Region struct {
	Name  string   `json:"name" yaml:"name"`
	CIDRs []string `json:"cidrs" yaml:"cidrs"`
	// Site serves the region's users by default.
	Site string `json:"site" yaml:"site"`
}

// Site is a data centre with its clusters.
type Site struct {
	Name string `json:"name" yaml:"name"`
	// Sibling takes the site's users when it (or all its clusters) is
	// down.
	Sibling string `json:"sibling,omitempty" yaml:"sibling,omitempty"`
	// Clusters each serve one domain; a user's cluster is picked by hash
	// and stays while the cluster is up.
	Clusters []Cluster `json:"clusters" yaml:"clusters"`
}

// Cluster is one cluster of a site.
type Cluster struct {
	Name   string `json:"name" yaml:"name"`
	Domain string `json:"domain" yaml:"domain"`
}

// Rule sends matching users to Site. A rule is either a whitelist
// (DeviceIDs, CustomerIDs and/or the named List) or a Bucket.
type Rule struct {
	Name string `json:"name" yaml:"name"`
	// Regions scope the rule; empty: every region.
	Regions     []string `json:"regions,omitempty" yaml:"regions,omitempty"`
	DeviceIDs   []string `json:"device_ids,omitempty" yaml:"device_ids,omitempty"`
	CustomerIDs []string `json:"customer_ids,omitempty" yaml:"customer_ids,omitempty"`
	// List names a Whitelist document, KeyWhitelists+List: large lists
	// live there (each document under the admin API's 1 MiB), so that the
	// table stays small. A list that does not exist matches nobody.
	List   string  `json:"list,omitempty" yaml:"list,omitempty"`
	Bucket *Bucket `json:"bucket,omitempty" yaml:"bucket,omitempty"`
	Site   string  `json:"site" yaml:"site"`
}

// Bucket selects the users whose salted hash falls in [From, To) percent of
// the slot table. Widening To from 10 to 20 moves exactly the users of the
// added slots.
type Bucket struct {
	// By is "device" (default) or "customer".
	By   string  `json:"by,omitempty" yaml:"by,omitempty"`
	From float64 `json:"from" yaml:"from"`
	To   float64 `json:"to" yaml:"to"`
}

// Validate names the bad field.
func (t *Table) Validate() error {
	if !routing.ValidDomain(t.DefaultDomain) {
		return config.Field("default_domain", "%q: want a domain", t.DefaultDomain)
	}
	if t.TTLSeconds < 0 || t.TTLSeconds > 7*24*3600 {
		return config.Field("ttl_seconds", "%d out of 0..604800", t.TTLSeconds)
	}
	sites := map[string]bool{}
	for i, s := range t.Sites {
		f := fmt.Sprintf("sites[%d]", i)
		if s.Name == "" || sites[s.Name] {
			return config.Field(f+".name", "%q: empty or duplicate", s.Name)
		}
		sites[s.Name] = true
		if len(s.Clusters) == 0 || len(s.Clusters) > 64 {
			return config.Field(f+".clusters", "want 1..64 clusters")
		}
		names := map[string]bool{}
		for j, c := range s.Clusters {
			if c.Name == "" || names[c.Name] {
				return config.Field(fmt.Sprintf("%s.clusters[%d].name", f, j), "%q: empty or duplicate", c.Name)
			}
			names[c.Name] = true
			if !routing.ValidDomain(c.Domain) {
				return config.Field(fmt.Sprintf("%s.clusters[%d].domain", f, j), "%q: want a domain", c.Domain)
			}
		}
	}
	for i, s := range t.Sites {
		if s.Sibling != "" && (!sites[s.Sibling] || s.Sibling == s.Name) {
			return config.Field(fmt.Sprintf("sites[%d].sibling", i), "%q: not another site", s.Sibling)
		}
	}
	if t.DefaultSite != "" && !sites[t.DefaultSite] {
		return config.Field("default_site", "%q: no such site", t.DefaultSite)
	}
	regions := map[string]bool{}
	for i, r := range t.Regions {
		f := fmt.Sprintf("regions[%d]", i)
		if r.Name == "" || regions[r.Name] {
			return config.Field(f+".name", "%q: empty or duplicate", r.Name)
		}
		regions[r.Name] = true
		if !sites[r.Site] {
			return config.Field(f+".site", "%q: no such site", r.Site)
		}
		for j, c := range r.CIDRs {
			if _, err := netip.ParsePrefix(c); err != nil {
				return config.Field(fmt.Sprintf("%s.cidrs[%d]", f, j), "%q: %v", c, err)
			}
		}
	}
	if len(t.Rules) > maxRules {
		return config.Field("rules", "%d rules, max %d", len(t.Rules), maxRules)
	}
	for i, r := range t.Rules {
		if err := r.validate(sites, regions); err != nil {
			return config.In(fmt.Sprintf("rules[%d]", i), err)
		}
	}
	return nil
}

func (r Rule) validate(sites, regions map[string]bool) error {
	if r.Name == "" {
		return config.Field("name", "required")
	}
	if !sites[r.Site] {
		return config.Field("site", "%q: no such site", r.Site)
	}
	for j, g := range r.Regions {
		if !regions[g] {
			return config.Field(fmt.Sprintf("regions[%d]", j), "%q: no such region", g)
		}
	}
	if r.List != "" && (strings.ContainsAny(r.List, "/ ") || len(r.List) > 128) {
		return config.Field("list", "%q: want a name without / or spaces", r.List)
	}
	list := len(r.DeviceIDs)+len(r.CustomerIDs) > 0 || r.List != ""
	if list == (r.Bucket != nil) {
		return config.Field("bucket", "set either bucket or device_ids/customer_ids")
	}
	if b := r.Bucket; b != nil {
		if b.By != "" && b.By != "device" && b.By != "customer" {
			return config.Field("bucket.by", "%q: want device or customer", b.By)
		}
		if b.From < 0 || b.To > 100 || b.From >= b.To {
			return config.Field("bucket", "from %v to %v: want 0 <= from < to <= 100", b.From, b.To)
		}
	}
	return nil
}

// Whitelist is a document of IDs (KeyWhitelists+name) for a rule's List.
type Whitelist struct {
	DeviceIDs   []string `json:"device_ids,omitempty" yaml:"device_ids,omitempty"`
	CustomerIDs []string `json:"customer_ids,omitempty" yaml:"customer_ids,omitempty"`
}

// Validate names the bad field.
func (w *Whitelist) Validate() error {
	for f, ids := range map[string][]string{"device_ids": w.DeviceIDs, "customer_ids": w.CustomerIDs} {
		for i, id := range ids {
			if id == "" || len(id) > maxIDLen {
				return config.Field(fmt.Sprintf("%s[%d]", f, i), "want 1..%d bytes", maxIDLen)
			}
		}
	}
	return nil
}

// State is the playbook state (document KeyState): what operators marked
// down.
type State struct {
	// SitesDown lists sites whose users go to their sibling.
	SitesDown []string `json:"sites_down,omitempty" yaml:"sites_down,omitempty"`
	// ClustersDown lists "site/cluster" pairs; their users go to the next
	// cluster of the site.
	ClustersDown []string `json:"clusters_down,omitempty" yaml:"clusters_down,omitempty"`
}

// Emergency overrides every rule (document KeyEmergency).
type Emergency struct {
	// Global, if set, answers for everyone.
	Global *Override `json:"global,omitempty" yaml:"global,omitempty"`
	// Regions answer for one region's users.
	Regions map[string]Override `json:"regions,omitempty" yaml:"regions,omitempty"`
}

// Override is an emergency answer: a site, or explicit domains.
type Override struct {
	Site    string   `json:"site,omitempty" yaml:"site,omitempty"`
	Primary string   `json:"primary,omitempty" yaml:"primary,omitempty"`
	Backups []string `json:"backups,omitempty" yaml:"backups,omitempty"`
}

func (o Override) validate() error {
	if (o.Site == "") == (o.Primary == "") {
		return config.Field("site", "set either site or primary")
	}
	if o.Primary != "" && !routing.ValidDomain(o.Primary) {
		return config.Field("primary", "%q: want a domain", o.Primary)
	}
	for i, b := range o.Backups {
		if !routing.ValidDomain(b) {
			return config.Field(fmt.Sprintf("backups[%d]", i), "%q: want a domain", b)
		}
	}
	return nil
}

// Validate names the bad field.
func (e *Emergency) Validate() error {
	if e.Global != nil {
		if err := e.Global.validate(); err != nil {
			return config.In("global", err)
		}
	}
	for name, o := range e.Regions {
		if err := o.validate(); err != nil {
			return config.In("regions."+name, err)
		}
	}
	return nil
}
