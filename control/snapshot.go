package control

import (
	"crypto/ed25519"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/routing"
)

// Snapshot is a compiled, immutable rule set: Decide reads it without
// locks. A new Snapshot is compiled on every change of the routing
// documents and published through an atomic pointer.
type Snapshot struct {
	*base
	version       int64
	sites         []cSite
	emGlobal      *cOverride
	emRegion      []*cOverride             // per region
	labels        []string                 // base labels, then the overrides'
	answers       []atomic.Pointer[signed] // (label*len(sites)+site)*maxClusters+cluster
	defaultAnswer *signed
	defaultDomain string
	key           ed25519.PrivateKey
	keyOnce       sync.Once
	keyID         string // routing.KeyID of key's public half
}

// maxBackups bounds an answer's backups.
const maxBackups = 16

type regionPrefix struct {
	p      netip.Prefix
	region int
}

type cRegion struct {
	name  string
	site  int
	label int
}

type cSite struct {
	name    string
	eff     int // the site that actually serves (itself, its sibling, or -1)
	sibling int
	usable  bool
	domains []string
	up      []bool
	nextUp  []int // nextUp[c]: the first up cluster at or after c (ring)
}

type cRule struct {
	name       string
	site       int
	regions    []bool // nil: all
	byCustomer bool
	from, to   uint32
	label      int
}

type cOverride struct {
	site   int // -1: fixed
	label  int
	answer *signed
}

// signed is one decided answer, encoded once; each request gets it signed
// for its device and time (AppendBody).
type signed struct {
	routing.Prepared
}

// Version is the rule set's revision, the answers' version.
func (s *Snapshot) Version() int64 { return s.version }

// PublicKey is the key answers are signed with.
func (s *Snapshot) PublicKey() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// region returns the index of addr's region, or -1.
func (s *Snapshot) region(addr netip.Addr) int {
	addr = addr.Unmap()
	for i := range s.prefixes {
		if s.prefixes[i].p.Contains(addr) {
			return s.prefixes[i].region
		}
	}
	return -1
}

// Region names addr's region ("" for none).
func (s *Snapshot) Region(addr netip.Addr) string {
	if r := s.region(addr); r >= 0 {
		return s.regions[r].name
	}
	return ""
}

// Decide applies the rules to one request: emergency override, whitelist,
// buckets, the region's site, the default. It allocates nothing once the
// answer's body has been signed (the first time that answer is given).
func (s *Snapshot) Decide(addr netip.Addr, deviceID, customerID string) *routing.Answer {
	return &s.decide(addr, deviceID, customerID).Answer
}

// Body returns the signed response body for a request at now: the
// decided answer bound to the device (routing.Answer.Bind).
func (s *Snapshot) Body(addr netip.Addr, deviceID, customerID string, now time.Time) []byte {
	return s.AppendBody(nil, addr, deviceID, customerID, now)
}

// AppendBody is Body appending to dst; with a dst of room enough it
// allocates nothing.
func (s *Snapshot) AppendBody(dst []byte, addr netip.Addr, deviceID, customerID string, now time.Time) []byte {
	return s.appendBody(dst, s.decide(addr, deviceID, customerID), deviceID, now)
}

// appendBody appends a's signed body, bound to deviceID at now, to dst: one
// Ed25519 signature per request, since the bytes name the device and the
// time (the answer itself was encoded once per snapshot).
func (s *Snapshot) appendBody(dst []byte, a *signed, deviceID string, now time.Time) []byte {
	s.keyOnce.Do(func() { s.keyID = routing.KeyID(s.PublicKey()) })
	return a.AppendSigned(dst, s.key, s.keyID, deviceID, now)
}

func (s *Snapshot) decide(addr netip.Addr, deviceID, customerID string) *signed {
	reg := s.region(addr)
	hd := hashID(s.salt, deviceID)
	pick := hd
	if deviceID == "" {
		pick = hashID(s.salt, customerID)
	}
	if o := s.emGlobal; o != nil {
		return s.override(o, pick)
	}
	if reg >= 0 && s.emRegion[reg] != nil {
		return s.override(s.emRegion[reg], pick)
	}
	best := int32(-1)
	if deviceID != "" {
		best = s.firstMatch(s.devices[deviceID], reg, best)
	}
	if customerID != "" {
		best = s.firstMatch(s.customers[customerID], reg, best)
	}
	if best >= 0 {
		r := &s.rules[best]
		return s.answer(r.label, r.site, pick)
	}
	var hc uint64
	if customerID != "" {
		hc = hashID(s.salt, customerID)
	}
	for _, i := range s.buckets {
		r := &s.rules[i]
		if r.regions != nil && (reg < 0 || !r.regions[reg]) {
			continue
		}
		h := hd
		if r.byCustomer {
			if customerID == "" {
				continue
			}
			h = hc
		} else if deviceID == "" {
			continue
		}
		if slot := uint32(h % Slots); slot >= r.from && slot < r.to {
			return s.answer(r.label, r.site, pick)
		}
	}
	if reg >= 0 {
		return s.answer(s.regions[reg].label, s.regions[reg].site, pick)
	}
	if s.defaultSite >= 0 {
		return s.answer(len(s.rules)+len(s.regions), s.defaultSite, pick)
	}
	return s.defaultAnswer
}

func (s *Snapshot) firstMatch(idx []int32, reg int, best int32) int32 {
	for _, i := range idx {
		if best >= 0 && i >= best {
			return best
		}
		r := &s.rules[i]
		if r.regions == nil || (reg >= 0 && r.regions[reg]) {
			return i
		}
	}
	return best
}

func (s *Snapshot) override(o *cOverride, pick uint64) *signed {
	if o.answer != nil {
		return o.answer
	}
	return s.answer(o.label, o.site, pick)
}

// answer returns the signed answer for a label, a target site and the
// user's cluster hash, building and signing it on first use.
func (s *Snapshot) answer(label, site int, pick uint64) *signed {
	eff := s.sites[site].eff
	if eff < 0 {
		return s.defaultAnswer
	}
	cs := &s.sites[eff]
	c := cs.nextUp[int((pick>>32)%uint64(len(cs.domains)))]
	i := (label*len(s.sites)+eff)*s.maxClusters + c
	if a := s.answers[i].Load(); a != nil {
		return a
	}
	a := s.build(s.labels[label], eff, c)
	if s.answers[i].CompareAndSwap(nil, a) {
		return a
	}
	return s.answers[i].Load()
}

// build lists the cluster's domain, the site's other up clusters in ring
// order, then the sibling's up clusters.
func (s *Snapshot) build(label string, site, c int) *signed {
	cs := &s.sites[site]
	a := routing.Answer{Primary: cs.domains[c], TTLSeconds: s.ttl, Rule: label, Version: s.version, Backups: []string{}}
	n := len(cs.domains)
	for k := 1; k < n; k++ {
		if j := (c + k) % n; cs.up[j] {
			a.Backups = append(a.Backups, cs.domains[j])
		}
	}
	if sib := cs.sibling; sib >= 0 && sib != site && s.sites[sib].usable {
		for j, d := range s.sites[sib].domains {
			if s.sites[sib].up[j] && !slices.Contains(a.Backups, d) {
				a.Backups = append(a.Backups, d)
			}
		}
	}
	if len(a.Backups) == 0 && cs.sibling >= 0 && cs.sibling != site {
		// Nothing else is up: the sibling's domains whatever their state (a
		// site marked down may be back before the next table), so that a
		// client always has a domain to fail over to.
		a.Backups = append(a.Backups, s.sites[cs.sibling].domains...)
	}
	a.Backups = s.withLastResort(a.Primary, a.Backups)
	return s.sign(a)
}

// withLastResort caps backups at maxBackups and, when they are empty, makes
// the default domain the one backup (unless it is the primary: then each
// site's first domain), so that an answer always carries a backup: a client's
// failover.Config needs one, and the answer without it is exactly the one a
// site outage produces.
func (s *Snapshot) withLastResort(primary string, backups []string) []string {
	if len(backups) == 0 && primary != s.defaultDomain {
		backups = append(backups, s.defaultDomain)
	}
	if len(backups) == 0 {
		for i := range s.sites {
			if d := s.sites[i].domains; len(d) > 0 && d[0] != primary && !slices.Contains(backups, d[0]) {
				backups = append(backups, d[0])
			}
		}
	}
	if backups == nil {
		backups = []string{} // "backups": [] rather than null on the wire
	}
	return backups[:min(len(backups), maxBackups)]
}

// sign prepares a for signing (routing.Prepare encodes it once); the
// signature is per request (appendBody).
func (s *Snapshot) sign(a routing.Answer) *signed {
	return &signed{routing.Prepare(a)}
}

// hashID is the salted bucket hash of an ID: FNV-1a over salt, NUL, id,
// then a splitmix64 finaliser. Stable across restarts and versions.
func hashID(salt, id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(salt); i++ {
		h = (h ^ uint64(salt[i])) * 1099511628211
	}
	h *= 1099511628211 // the NUL separator: h ^ 0 == h
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
