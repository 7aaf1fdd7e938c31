package dnsserver

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/miekg/dns"

	"github.com/veerhq/veer/config"
)

// Data is what the server answers from: its zones (with their access
// domains) and the region table. A Source delivers it; the file source reads
// it from the same YAML file as Config, the control plane's store will carry
// the same shape.
type Data struct {
	// Zones are the authoritative zones. Default none.
	Zones []Zone `yaml:"zones" json:"zones"`
	// Regions maps client address ranges to region names, longest prefix
	// first; it is the table the control plane uses. Default none (every
	// client is in no region and gets nodes of all regions).
	Regions []Region `yaml:"regions" json:"regions"`
}

// Zone is one authoritative zone.
type Zone struct {
	// Origin is the zone's apex, e.g. "example.test.". Required.
	Origin string `yaml:"origin" json:"origin"`
	// TTL is the TTL of records written without one. Default 300.
	TTL uint32 `yaml:"ttl" json:"ttl"`
	// SOA is the SOA record's data: "mname rname serial refresh retry expire
	// minimum". Default "ns1.<origin> hostmaster.<origin> 1 3600 600 86400
	// 60". Its minimum field is the negative-answer TTL (RFC 2308).
	SOA string `yaml:"soa" json:"soa"`
	// NS lists the zone's name servers. Default the SOA's mname.
	NS []string `yaml:"ns" json:"ns"`
	// Records are zone-file lines, names relative to Origin ("@" is the
	// apex): "www 60 A 192.0.2.1". Types: A, AAAA, CNAME, TXT, MX, SRV,
	// CAA, PTR. Default none.
	Records []string `yaml:"records" json:"records"`
	// Access are the health-aware access domains of this zone.
	Access []Access `yaml:"access" json:"access"`
}

// Access is an access domain: its A and AAAA answers are picked from the
// healthy nodes of the client's region by weighted shuffle.
type Access struct {
	// Name is relative to the zone's origin ("@" is the apex) or absolute.
	// Required.
	Name string `yaml:"name" json:"name"`
	// TTL of the answers. Default 30.
	TTL uint32 `yaml:"ttl" json:"ttl"`
	// Answers is how many addresses one answer carries. Default all.
	Answers int `yaml:"answers" json:"answers"`
	// Nodes are the access nodes. At least one.
	Nodes []Node `yaml:"nodes" json:"nodes"`
}

// Node is one access node.
type Node struct {
	// Addr is the node's IPv4 or IPv6 address. Required.
	Addr string `yaml:"addr" json:"addr"`
	// Region is the node's region. Default "": the node serves clients of
	// any region whose own region has no healthy node.
	Region string `yaml:"region" json:"region"`
	// Weight is the node's share within its region. Default 1.
	Weight int `yaml:"weight" json:"weight"`
	// Check is the health check: "tcp://host:port" (a connect succeeds) or
	// "http://host:port/path" (a 2xx status). Default none: always healthy.
	Check string `yaml:"check" json:"check"`
}

// Region is one row of the region table.
type Region struct {
	// CIDR is the client address range. Required.
	CIDR string `yaml:"cidr" json:"cidr"`
	// Region is its name. Required.
	Region string `yaml:"region" json:"region"`
}

// allowedTypes are the record types a zone may list; SOA and NS have their
// own fields, delegation and DNSSEC are not supported.
var allowedTypes = map[uint16]bool{
	dns.TypeA: true, dns.TypeAAAA: true, dns.TypeCNAME: true, dns.TypeTXT: true,
	dns.TypeMX: true, dns.TypeSRV: true, dns.TypeCAA: true, dns.TypePTR: true,
}

// Validate reports every invalid field, with the path of the field.
func (d Data) Validate() error {
	_, err := compileData(d)
	return err
}

// compileData validates d and builds the lookup structures.
func compileData(d Data) (*snapshot, error) {
	var errs []error
	s := &snapshot{zones: map[string]*zone{}}
	for i, z := range d.Zones {
		path := fmt.Sprintf("zones[%d]", i)
		cz, err := compileZone(z)
		if err != nil {
			errs = append(errs, config.In(path, err))
			continue
		}
		if _, dup := s.zones[cz.origin]; dup {
			errs = append(errs, config.Field(path+".origin", "zone %s listed twice", cz.origin))
			continue
		}
		s.zones[cz.origin] = cz
	}
	for i, r := range d.Regions {
		p, err := netip.ParsePrefix(r.CIDR)
		if err != nil {
			errs = append(errs, config.Field(fmt.Sprintf("regions[%d].cidr", i), "want a CIDR, got %q", r.CIDR))
		}
		if r.Region == "" {
			errs = append(errs, config.Field(fmt.Sprintf("regions[%d].region", i), "required"))
		}
		if err == nil {
			s.regions = append(s.regions, regionRow{p.Masked(), r.Region})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.sortRegions()
	s.precompute()
	return s, nil
}

func compileZone(z Zone) (*zone, error) {
	var errs []error
	if z.Origin == "" {
		return nil, config.Field("origin", "required")
	}
	if _, ok := dns.IsDomainName(z.Origin); !ok {
		return nil, config.Field("origin", "not a domain name: %q", z.Origin)
	}
	origin := strings.ToLower(dns.Fqdn(z.Origin))
	ttl := z.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	cz := newZone(origin)
	soaText := z.SOA
	if soaText == "" {
		below := origin // names below the origin: "ns1." + origin, but "ns1." for the root
		if below == "." {
			below = ""
		}
		soaText = fmt.Sprintf("ns1.%s hostmaster.%s 1 3600 600 86400 60", below, below)
	}
	rr, err := parseRR(fmt.Sprintf("@ %d IN SOA %s", ttl, soaText), origin, ttl)
	if err != nil {
		errs = append(errs, config.Field("soa", "%w", err))
	} else {
		cz.soa = rr.(*dns.SOA)
		cz.add(rr)
	}
	ns := z.NS
	if len(ns) == 0 && cz.soa != nil {
		ns = []string{cz.soa.Ns}
	}
	for i, n := range ns {
		rr, err := parseRR(fmt.Sprintf("@ %d IN NS %s", ttl, n), origin, ttl)
		if err != nil {
			errs = append(errs, config.Field(fmt.Sprintf("ns[%d]", i), "%w", err))
			continue
		}
		cz.add(rr)
	}
	for i, line := range z.Records {
		field := fmt.Sprintf("records[%d]", i)
		rr, err := parseRR(line, origin, ttl)
		if err != nil {
			errs = append(errs, config.Field(field, "%w", err))
			continue
		}
		h := rr.Header()
		if !allowedTypes[h.Rrtype] {
			errs = append(errs, config.Field(field, "type %s not supported (want A, AAAA, CNAME, TXT, MX, SRV, CAA, PTR; SOA and NS have their own fields)", dns.TypeToString[h.Rrtype]))
			continue
		}
		if !dns.IsSubDomain(origin, h.Name) {
			errs = append(errs, config.Field(field, "%s is outside the zone %s", h.Name, origin))
			continue
		}
		if err := cz.addChecked(rr); err != nil {
			errs = append(errs, config.Field(field, "%w", err))
		}
	}
	for i, a := range z.Access {
		path := fmt.Sprintf("access[%d]", i)
		ad, err := compileAccess(a, origin)
		if err != nil {
			errs = append(errs, config.In(path, err))
			continue
		}
		if err := cz.addAccess(ad); err != nil {
			errs = append(errs, config.Field(path+".name", "%w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cz.finish()
	return cz, nil
}

func compileAccess(a Access, origin string) (*accessDomain, error) {
	var errs []error
	name, err := absName(a.Name, origin)
	if err != nil {
		errs = append(errs, config.Field("name", "%w", err))
	} else if !dns.IsSubDomain(origin, name) {
		errs = append(errs, config.Field("name", "%s is outside the zone %s", name, origin))
	}
	if a.Answers < 0 {
		errs = append(errs, config.Field("answers", "must not be negative, got %d", a.Answers))
	}
	if len(a.Nodes) == 0 {
		errs = append(errs, config.Field("nodes", "at least one node is required"))
	}
	ad := &accessDomain{name: name, ttl: a.TTL, answers: a.Answers}
	if ad.ttl == 0 {
		ad.ttl = DefaultAccessTTL
	}
	for i, n := range a.Nodes {
		path := fmt.Sprintf("nodes[%d]", i)
		addr, err := netip.ParseAddr(n.Addr)
		if err != nil || addr.Zone() != "" {
			errs = append(errs, config.Field(path+".addr", "want an IP address, got %q", n.Addr))
			continue
		}
		if n.Weight < 0 {
			errs = append(errs, config.Field(path+".weight", "must not be negative, got %d", n.Weight))
		}
		if err := validCheck(n.Check); err != nil {
			errs = append(errs, config.Field(path+".check", "%w", err))
		}
		w := n.Weight
		if w == 0 {
			w = 1
		}
		ad.nodes = append(ad.nodes, accessNode{addr: addr.Unmap(), region: n.Region, weight: float64(w), check: n.Check})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ad, nil
}

// validCheck accepts "", "tcp://host:port" and "http://host:port/path".
func validCheck(c string) error {
	if c == "" {
		return nil
	}
	u, err := url.Parse(c)
	if err != nil {
		return fmt.Errorf("want tcp://host:port or http://host:port/path, got %q", c)
	}
	switch u.Scheme {
	case "tcp":
		if u.Port() == "" || u.Hostname() == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("want tcp://host:port, got %q", c)
		}
	case "http":
		if u.Hostname() == "" {
			return fmt.Errorf("want http://host:port/path, got %q", c)
		}
	default:
		return fmt.Errorf("scheme must be tcp or http, got %q", c)
	}
	return nil
}

// parseRR parses one zone-file line relative to origin.
func parseRR(line, origin string, ttl uint32) (dns.RR, error) {
	if strings.ContainsAny(line, "\n\r$") {
		return nil, fmt.Errorf("one record per line, no directives: %q", line)
	}
	zp := dns.NewZoneParser(strings.NewReader(line), origin, "")
	zp.SetDefaultTTL(ttl)
	rr, ok := zp.Next()
	if err := zp.Err(); err != nil {
		return nil, err
	}
	if !ok || rr == nil {
		return nil, fmt.Errorf("no record in %q", line)
	}
	if _, more := zp.Next(); more {
		return nil, fmt.Errorf("more than one record in %q", line)
	}
	if rr.Header().Class != dns.ClassINET {
		return nil, fmt.Errorf("class must be IN: %q", line)
	}
	rr.Header().Name = strings.ToLower(rr.Header().Name)
	return rr, nil
}

// absName makes name absolute under origin ("@" is origin).
func absName(name, origin string) (string, error) {
	switch {
	case name == "":
		return "", errors.New("required")
	case name == "@":
		return origin, nil
	case strings.HasSuffix(name, "."):
	default:
		name = name + "." + origin
	}
	if _, ok := dns.IsDomainName(name); !ok {
		return "", fmt.Errorf("not a domain name: %q", name)
	}
	return strings.ToLower(name), nil
}
