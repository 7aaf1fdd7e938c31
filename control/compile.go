package control

import (
	"cmp"
	"crypto/ed25519"
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/veerhq/veer/routing"
)

// Compile builds a Snapshot from the routing documents at version. t must
// have passed Validate; names in st and em that the table does not know are
// ignored.
func Compile(t *Table, st *State, em *Emergency, version int64, key ed25519.PrivateKey) *Snapshot {
	s := &Snapshot{version: version, ttl: cmp.Or(t.TTLSeconds, DefaultAnswerTTL), salt: t.Salt, key: key,
		devices: map[string][]int32{}, customers: map[string][]int32{}, defaultSite: -1}
	siteIdx := map[string]int{}
	for i, site := range t.Sites {
		siteIdx[site.Name] = i
		s.maxClusters = max(s.maxClusters, len(site.Clusters))
	}
	down := map[string]bool{}
	if st != nil {
		for _, n := range st.SitesDown {
			down[n] = true
		}
		for _, n := range st.ClustersDown {
			down["cluster:"+n] = true
		}
	}
	s.sites = make([]cSite, len(t.Sites))
	for i, site := range t.Sites {
		cs := &s.sites[i]
		cs.name, cs.sibling = site.Name, -1
		if j, ok := siteIdx[site.Sibling]; ok {
			cs.sibling = j
		}
		for _, c := range site.Clusters {
			cs.domains = append(cs.domains, c.Domain)
			up := !down["cluster:"+site.Name+"/"+c.Name]
			cs.up = append(cs.up, up)
			cs.usable = cs.usable || up
		}
		cs.usable = cs.usable && !down[site.Name]
		n := len(cs.domains)
		cs.nextUp = make([]int, n)
		for c := range n {
			cs.nextUp[c] = c
			for k := range n {
				if cs.up[(c+k)%n] {
					cs.nextUp[c] = (c + k) % n
					break
				}
			}
		}
	}
	for i := range s.sites {
		s.sites[i].eff = -1
		if s.sites[i].usable {
			s.sites[i].eff = i
		} else if sib := s.sites[i].sibling; sib >= 0 && s.sites[sib].usable {
			s.sites[i].eff = sib
		}
	}
	regIdx := map[string]int{}
	for i, r := range t.Regions {
		regIdx[r.Name] = i
		for _, c := range r.CIDRs {
			p, _ := netip.ParsePrefix(c)
			s.prefixes = append(s.prefixes, regionPrefix{p.Masked(), i})
		}
	}
	slices.SortStableFunc(s.prefixes, func(a, b regionPrefix) int { return b.p.Bits() - a.p.Bits() })
	for i, r := range t.Rules {
		cr := cRule{name: r.Name, site: siteIdx[r.Site], label: len(s.labels)}
		if len(r.Regions) > 0 {
			cr.regions = make([]bool, len(t.Regions))
			for _, g := range r.Regions {
				cr.regions[regIdx[g]] = true
			}
		}
		if b := r.Bucket; b != nil {
			s.labels = append(s.labels, "bucket:"+r.Name)
			cr.byCustomer = b.By == "customer"
			cr.from, cr.to = slot(b.From), slot(b.To)
			s.buckets = append(s.buckets, int32(i))
		} else {
			s.labels = append(s.labels, "whitelist:"+r.Name)
			for _, id := range r.DeviceIDs {
				s.devices[id] = append(s.devices[id], int32(i))
			}
			for _, id := range r.CustomerIDs {
				s.customers[id] = append(s.customers[id], int32(i))
			}
		}
		s.rules = append(s.rules, cr)
	}
	for _, r := range t.Regions {
		s.regions = append(s.regions, cRegion{name: r.Name, site: siteIdx[r.Site], label: len(s.labels)})
		s.labels = append(s.labels, "region:"+r.Name)
	}
	s.labels = append(s.labels, "default_site")
	if t.DefaultSite != "" {
		s.defaultSite = siteIdx[t.DefaultSite]
	}
	s.defaultAnswer = s.sign(routing.Answer{Primary: t.DefaultDomain, Backups: []string{}, TTLSeconds: s.ttl, Rule: "default", Version: version})
	s.emRegion = make([]*cOverride, len(t.Regions))
	if em != nil {
		if em.Global != nil {
			s.emGlobal = s.compileOverride("emergency:global", *em.Global, siteIdx)
		}
		for name, o := range em.Regions {
			if i, ok := regIdx[name]; ok {
				s.emRegion[i] = s.compileOverride("emergency:"+name, o, siteIdx)
			}
		}
	}
	s.answers = make([]atomic.Pointer[signed], len(s.labels)*len(s.sites)*max(s.maxClusters, 1))
	return s
}

func (s *Snapshot) compileOverride(label string, o Override, siteIdx map[string]int) *cOverride {
	if o.Primary != "" {
		return &cOverride{site: -1, answer: s.sign(routing.Answer{Primary: o.Primary, Backups: slices.Clone(o.Backups),
			TTLSeconds: s.ttl, Rule: label, Version: s.version})}
	}
	i, ok := siteIdx[o.Site]
	if !ok {
		return nil
	}
	c := &cOverride{site: i, label: len(s.labels)}
	s.labels = append(s.labels, label)
	return c
}

// slot converts a percentage to a slot boundary (0.01 % resolution).
func slot(pct float64) uint32 {
	return uint32(pct*Slots/100 + 0.5)
}
