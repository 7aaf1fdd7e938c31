// Package docs holds the schemas of the store's documents that more than
// one service reads, so that each is written once: the access nodes
// (store.KeyAccess), which the control plane's scheduling API serves and the
// private DNS answers with. Keys are in package store (store/keys.go); a
// document that only the control plane reads keeps its schema in control.
//
// Contract: each schema is a plain struct with json and yaml tags, decoded
// strictly by the writer (config.Parse: unknown fields are errors naming
// key:line) and validated with its Validate method before it is written;
// a reader that may run beside a newer writer (the DNS) decodes it
// leniently, ignoring fields it does not know. The access node embeds the
// scheduling API's wire node (routing/schedule.Node), so a field added to
// what clients are told is in the document at once.
//
// Failure mode: Validate returns a config.Field error naming the field
// ("default[1].addr"); config.Parse and config.Locate add the document's key
// and line. Nothing here reads the store.
package docs

import (
	"fmt"
	"net/netip"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/routing/schedule"
)

// Access is the scheduling API's document (store.KeyAccess): access nodes by
// region (regions and their CIDRs come from the routing table).
type Access struct {
	// TTLSeconds of the answers, 0..86400; default
	// control.DefaultScheduleTTL.
	TTLSeconds int `json:"ttl_seconds,omitempty" yaml:"ttl_seconds,omitempty"`
	// Regions maps a region name to its nodes.
	Regions map[string][]AccessNode `json:"regions,omitempty" yaml:"regions,omitempty"`
	// Default nodes serve clients in no region, or in a region without
	// healthy nodes.
	Default []AccessNode `json:"default,omitempty" yaml:"default,omitempty"`
}

// AccessNode is one access node: what clients are told (schedule.Node:
// addr, server_name, protocols) and what only the servers read.
type AccessNode struct {
	schedule.Node `yaml:",inline"`
	// Weight orders the nodes, highest first; default 1.
	Weight int `json:"weight,omitempty" yaml:"weight,omitempty"`
	// Down takes the node out of the answers (health).
	Down bool `json:"down,omitempty" yaml:"down,omitempty"`
	// Domains it serves; empty: every domain.
	Domains []string `json:"domains,omitempty" yaml:"domains,omitempty"`
}

// MaxAccessTTL bounds Access.TTLSeconds (a day: schedule.MaxTTLSeconds).
const MaxAccessTTL = schedule.MaxTTLSeconds

// Validate names the bad field.
func (a *Access) Validate() error {
	if a.TTLSeconds < 0 || a.TTLSeconds > MaxAccessTTL {
		return config.Field("ttl_seconds", "%d out of 0..%d", a.TTLSeconds, MaxAccessTTL)
	}
	check := func(f string, ns []AccessNode) error {
		for i, n := range ns {
			ap, err := netip.ParseAddrPort(n.Addr)
			if err != nil || ap.Port() == 0 {
				return config.Field(fmt.Sprintf("%s[%d].addr", f, i), "%q: want ip:port", n.Addr)
			}
			for _, p := range n.Protocols {
				if !schedule.KnownProtocol(p) {
					return config.Field(fmt.Sprintf("%s[%d].protocols", f, i), "%q: want h3, h2 or http/1.1", p)
				}
			}
			if n.Weight < 0 {
				return config.Field(fmt.Sprintf("%s[%d].weight", f, i), "negative")
			}
		}
		return nil
	}
	if err := check("default", a.Default); err != nil {
		return err
	}
	for r, ns := range a.Regions {
		if err := check("regions."+r, ns); err != nil {
			return err
		}
	}
	return nil
}
