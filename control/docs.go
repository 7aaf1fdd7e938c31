package control

import (
	"fmt"
	"slices"
	"strings"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/limit"
	"github.com/veerhq/veer/shed"
)

// Documents lists the document keys the admin API accepts, each decoded
// strictly and validated before it is written: a bad document is rejected
// naming its field and line, and the stored one keeps running.
var Documents = []string{KeyTable, KeyState, KeyEmergency, KeyAccess, KeyCriticality, KeyLimits}

// operatorKeys may be written by operators (the playbook documents);
// everything else needs an admin.
var operatorKeys = []string{KeyState, KeyEmergency}

// ValidateDocument decodes data (YAML or JSON) as the document key holds and
// validates it. Errors read "key:line: field: problem".
func ValidateDocument(key string, data []byte) (any, error) {
	var v any
	switch key {
	case KeyTable:
		v = new(Table)
	case KeyState:
		v = new(State)
	case KeyEmergency:
		v = new(Emergency)
	case KeyAccess:
		v = new(Access)
	case KeyCriticality:
		v = new(shed.Config)
	case KeyLimits:
		v = new(limit.Config)
	default:
		name, ok := strings.CutPrefix(key, KeyWhitelists)
		if !ok || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("unknown document %q; known: %s, %s<name>", key, strings.Join(Documents, ", "), KeyWhitelists)
		}
		v = new(Whitelist)
	}
	if err := config.Parse(data, key, v); err != nil {
		return nil, err
	}
	return v, nil
}

// validateDocument is ValidateDocument for the documents of
// Options.Documents too (their decoded value is nil: the service does not
// read them).
func (s *Service) validateDocument(key string, data []byte) (any, error) {
	if v, ok := s.extraDocs[key]; ok {
		return nil, v(data)
	}
	return ValidateDocument(key, data)
}

// checkAgainstTable verifies that the names a State or Emergency uses
// exist in the current table (when there is one).
func checkAgainstTable(doc any, t *Table) error {
	if t == nil {
		return nil
	}
	sites := map[string][]string{}
	for _, s := range t.Sites {
		for _, c := range s.Clusters {
			sites[s.Name] = append(sites[s.Name], c.Name)
		}
	}
	regions := map[string]bool{}
	for _, r := range t.Regions {
		regions[r.Name] = true
	}
	switch d := doc.(type) {
	case *State:
		for i, s := range d.SitesDown {
			if _, ok := sites[s]; !ok {
				return config.Field(fmt.Sprintf("sites_down[%d]", i), "%q: no such site", s)
			}
		}
		for i, sc := range d.ClustersDown {
			site, cl, _ := strings.Cut(sc, "/")
			if !slices.Contains(sites[site], cl) {
				return config.Field(fmt.Sprintf("clusters_down[%d]", i), "%q: no such site/cluster", sc)
			}
		}
	case *Emergency:
		if d.Global != nil && d.Global.Site != "" {
			if _, ok := sites[d.Global.Site]; !ok {
				return config.Field("global.site", "%q: no such site", d.Global.Site)
			}
		}
		for r, o := range d.Regions {
			if !regions[r] {
				return config.Field("regions."+r, "no such region")
			}
			if _, ok := sites[o.Site]; o.Site != "" && !ok {
				return config.Field("regions."+r+".site", "%q: no such site", o.Site)
			}
		}
	}
	return nil
}
