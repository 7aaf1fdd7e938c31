package control

import (
	"cmp"
	"crypto/ed25519"
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/veerhq/veer/routing"
)

// base is the part of a snapshot compiled from the table and the
// whitelists alone (the expensive part: the ID indexes). Snapshots that
// differ only in state or emergency share it; it is never modified.
type base struct {
	baseVersion baseID // the inputs' identity (Service only)
	table       *Table
	ttl         int
	salt        string
	prefixes    []regionPrefix // longest first
	regions     []cRegion
	defaultSite int
	rules       []cRule
	devices     map[string][]int32 // whitelist rule indices, in order
	customers   map[string][]int32
	buckets     []int32 // bucket rule indices, in order
	labels      []string
	maxClusters int
	siteIdx     map[string]int
	regIdx      map[string]int
}

// Compile builds a Snapshot from the routing documents at version. t must
// have passed Validate; names in st and em that the table does not know are
// ignored.
func Compile(t *Table, st *State, em *Emergency, version int64, key ed25519.PrivateKey) *Snapshot {
	return CompileLists(t, st, em, nil, version, key)
}

// CompileLists is Compile with the Whitelist documents rules name in List,
// by name.
func CompileLists(t *Table, st *State, em *Emergency, lists map[string]*Whitelist, version int64, key ed25519.PrivateKey) *Snapshot {
	return compileBase(t, lists).overlay(st, em, version, key)
}

func compileBase(t *Table, lists map[string]*Whitelist) *base {
	b := &base{table: t, ttl: cmp.Or(t.TTLSeconds, DefaultAnswerTTL), salt: t.Salt,
		devices: map[string][]int32{}, customers: map[string][]int32{}, defaultSite: -1,
		siteIdx: map[string]int{}, regIdx: map[string]int{}}
	for i, site := range t.Sites {
		b.siteIdx[site.Name] = i
		b.maxClusters = max(b.maxClusters, len(site.Clusters))
	}
	for i, r := range t.Regions {
		b.regIdx[r.Name] = i
		for _, c := range r.CIDRs {
			p, _ := netip.ParsePrefix(c)
			b.prefixes = append(b.prefixes, regionPrefix{p.Masked(), i})
		}
	}
	slices.SortStableFunc(b.prefixes, func(x, y regionPrefix) int { return y.p.Bits() - x.p.Bits() })
	index := func(m map[string][]int32, ids []string, i int32) {
		for _, id := range ids {
			if ix := m[id]; len(ix) == 0 || ix[len(ix)-1] != i {
				m[id] = append(ix, i)
			}
		}
	}
	for i, r := range t.Rules {
		cr := cRule{name: r.Name, site: b.siteIdx[r.Site], label: len(b.labels)}
		if len(r.Regions) > 0 {
			cr.regions = make([]bool, len(t.Regions))
			for _, g := range r.Regions {
				cr.regions[b.regIdx[g]] = true
			}
		}
		if bk := r.Bucket; bk != nil {
			b.labels = append(b.labels, "bucket:"+r.Name)
			cr.byCustomer = bk.By == "customer"
			cr.from, cr.to = slot(bk.From), slot(bk.To)
			b.buckets = append(b.buckets, int32(i))
		} else {
			b.labels = append(b.labels, "whitelist:"+r.Name)
			index(b.devices, r.DeviceIDs, int32(i))
			index(b.customers, r.CustomerIDs, int32(i))
			if l := lists[r.List]; r.List != "" && l != nil {
				index(b.devices, l.DeviceIDs, int32(i))
				index(b.customers, l.CustomerIDs, int32(i))
			}
		}
		b.rules = append(b.rules, cr)
	}
	for _, r := range t.Regions {
		b.regions = append(b.regions, cRegion{name: r.Name, site: b.siteIdx[r.Site], label: len(b.labels)})
		b.labels = append(b.labels, "region:"+r.Name)
	}
	b.labels = append(b.labels, "default_site")
	if t.DefaultSite != "" {
		b.defaultSite = b.siteIdx[t.DefaultSite]
	}
	return b
}

// overlay applies the playbook state and the emergency overrides.
func (b *base) overlay(st *State, em *Emergency, version int64, key ed25519.PrivateKey) *Snapshot {
	t := b.table
	s := &Snapshot{base: b, version: version, key: key, labels: slices.Clip(b.labels)}
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
		if j, ok := b.siteIdx[site.Sibling]; ok {
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
	s.defaultDomain = t.DefaultDomain
	s.defaultAnswer = s.sign(routing.Answer{Primary: t.DefaultDomain, Backups: s.withLastResort(t.DefaultDomain, nil), TTLSeconds: b.ttl, Rule: "default", Version: version})
	s.emRegion = make([]*cOverride, len(t.Regions))
	if em != nil {
		if em.Global != nil {
			s.emGlobal = s.compileOverride("emergency:global", *em.Global)
		}
		for name, o := range em.Regions {
			if i, ok := b.regIdx[name]; ok {
				s.emRegion[i] = s.compileOverride("emergency:"+name, o)
			}
		}
	}
	s.answers = make([]atomic.Pointer[signed], len(s.labels)*len(s.sites)*max(b.maxClusters, 1))
	return s
}

func (s *Snapshot) compileOverride(label string, o Override) *cOverride {
	if o.Primary != "" {
		return &cOverride{site: -1, answer: s.sign(routing.Answer{Primary: o.Primary, Backups: s.withLastResort(o.Primary, slices.Clone(o.Backups)),
			TTLSeconds: s.ttl, Rule: label, Version: s.version})}
	}
	i, ok := s.siteIdx[o.Site]
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
