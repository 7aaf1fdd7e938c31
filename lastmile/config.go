package lastmile

import (
	"cmp"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/miekg/dns"
	"github.com/veerhq/veer/config"
)

// Config is the last-mile chain's configuration. The zero value works: it
// resolves the request's host with the system resolver and races HTTP/3
// against TCP to it.
type Config struct {
	// Steps is the route chain in order. Default: scheduler, direct, cdn,
	// fallback_ip. A step without configuration (no scheduler URL, no CDN
	// domains, no fallback IPs) is skipped.
	Steps []RouteStep `yaml:"steps" json:"steps"`
	// Port is used for hosts given without a port and for CDN domains.
	// Default 443.
	Port int `yaml:"port" json:"port"`
	// MaxRouteFailures is how many consecutive network failures on a working
	// route drop it, so that the next request re-runs the chain. Default 3.
	MaxRouteFailures int `yaml:"max_route_failures" json:"max_route_failures"`
	// NoRouteHold is how long a failed chain run for a host is remembered:
	// requests to that host in that time fail at once with the same error
	// instead of running the chain again. NetworkChanged forgets it.
	// Default 2s; negative: not remembered.
	NoRouteHold time.Duration `yaml:"no_route_hold" json:"no_route_hold"`
	// Stagger is happy eyeballs across nodes and route steps (RFC 8305
	// section 5): how long a node, or a route step, may try without a
	// route before the next one starts beside it (a failure starts the
	// next one at once). The first route wins; when both an earlier and a
	// later attempt are ready, the one that answered first is kept.
	// Default 200ms; negative: one after another.
	Stagger time.Duration `yaml:"stagger" json:"stagger"`
	// DNS configures the resolver chain.
	DNS DNSConfig `yaml:"dns" json:"dns"`
	// Scheduler configures the scheduling-service client.
	Scheduler SchedulerConfig `yaml:"scheduler" json:"scheduler"`
	// Race configures protocol racing to a node.
	Race RaceConfig `yaml:"race" json:"race"`
	// CDN lists the CDN vendor domains, tried in order. Default none.
	CDN []CDNDomain `yaml:"cdn" json:"cdn"`
	// FallbackIPs lists load-balancer addresses dialled directly, in order.
	// Default none.
	FallbackIPs []FallbackIP `yaml:"fallback_ips" json:"fallback_ips"`
}

// DNSConfig configures the resolver chain.
type DNSConfig struct {
	// Order is the resolver chain in order. Default: system, private_udp,
	// private_race, doh, bootstrap. Steps without configuration are skipped.
	Order []ResolverStep `yaml:"order" json:"order"`
	// PrivateServers are the private DNS servers ("ZNS"), "ip:port" (port
	// default 53), tried in order. Default none.
	PrivateServers []string `yaml:"private_servers" json:"private_servers"`
	// Timeout bounds one resolver step. Default 2s.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// DoHURL is the DNS-over-HTTPS endpoint (RFC 8484), e.g.
	// https://1.1.1.1/dns-query. Default none (step skipped).
	DoHURL string `yaml:"doh_url" json:"doh_url"`
	// DoHMethod is GET (default) or POST.
	DoHMethod string `yaml:"doh_method" json:"doh_method"`
	// Bootstrap maps names to addresses used when every DNS step failed and
	// the cache has nothing. Default none.
	Bootstrap map[string][]string `yaml:"bootstrap" json:"bootstrap"`
	// Expected maps a domain (which covers its subdomains) to the address
	// ranges (CIDR) its answers must fall in; an answer outside is treated
	// as hijacked. Default none (no check).
	Expected map[string][]string `yaml:"expected" json:"expected"`
	// SystemTTL is the TTL given to system-resolver answers, which carry
	// none. Default 60s.
	SystemTTL time.Duration `yaml:"system_ttl" json:"system_ttl"`
	// MinTTL and MaxTTL clamp answer TTLs. Defaults 10s and 1h.
	MinTTL time.Duration `yaml:"min_ttl" json:"min_ttl"`
	MaxTTL time.Duration `yaml:"max_ttl" json:"max_ttl"`
	// MaxStale is how long past its TTL an answer may be served when every
	// source fails (RFC 8767 serve-stale). Default 72h; negative disables.
	MaxStale time.Duration `yaml:"max_stale" json:"max_stale"`
	// StaleAnswerTimeout is RFC 8767's client response timer: when a
	// stale answer is cached and resolution has not answered after this
	// long, the stale answer is served while resolution goes on in the
	// background to refresh the cache. Default 1.8s; negative: stale data
	// only after every source failed.
	StaleAnswerTimeout time.Duration `yaml:"stale_answer_timeout" json:"stale_answer_timeout"`
	// DeadServerHold is how long a resolver that timed out (a private
	// server over UDP or over TCP, the system resolver, the DoH endpoint)
	// is not asked again, within a chain run and across runs. Default 30s;
	// negative: always ask.
	DeadServerHold time.Duration `yaml:"dead_server_hold" json:"dead_server_hold"`
	// CacheFile persists the cache (written atomically after each change;
	// a corrupt file is ignored with a warning). Default none (memory only).
	CacheFile string `yaml:"cache_file" json:"cache_file"`
	// MaxEntries bounds the cache. Default 1024.
	MaxEntries int `yaml:"max_entries" json:"max_entries"`
}

// SchedulerConfig configures the scheduling-service ("access-ctrl") client.
type SchedulerConfig struct {
	// URL of the schedule endpoint (docs/lastmile.md), https. Its host is
	// resolved through the resolver chain. Default none (step skipped).
	URL string `yaml:"url" json:"url"`
	// Timeout bounds one scheduler attempt. Default 3s.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// MaxTTL caps the TTL of a schedule answer. Default 1h.
	MaxTTL time.Duration `yaml:"max_ttl" json:"max_ttl"`
	// Client is sent as the request's "client" field (SDK name/version).
	// Default "veer".
	Client string `yaml:"client" json:"client"`
}

// RaceConfig configures protocol racing.
type RaceConfig struct {
	// TCPDelay is how long after QUIC the TCP attempt starts. Default 250ms.
	TCPDelay time.Duration `yaml:"tcp_delay" json:"tcp_delay"`
	// ConnectTimeout bounds one protocol attempt (dial + handshake).
	// Default 5s.
	ConnectTimeout time.Duration `yaml:"connect_timeout" json:"connect_timeout"`
	// DisableH3 turns HTTP/3 off (TCP only). Default false.
	DisableH3 bool `yaml:"disable_h3" json:"disable_h3"`
	// AssumeH3 races QUIC to every node from the first contact. Default
	// false: QUIC is tried only on a node that advertised HTTP/3, in an
	// Alt-Svc header on the same port (remembered for its max-age and
	// persisted with the DNS cache) or in a scheduler answer; an origin
	// that never advertised h3 costs no QUIC attempt.
	AssumeH3 bool `yaml:"assume_h3" json:"assume_h3"`
	// BrokenBase is how long a protocol that failed on a node is skipped
	// after its first failure; each further failure doubles it. Default 5m.
	BrokenBase time.Duration `yaml:"broken_base" json:"broken_base"`
	// BrokenMax caps that duration. Default 2h.
	BrokenMax time.Duration `yaml:"broken_max" json:"broken_max"`
}

// CDNDomain is one CDN vendor domain.
type CDNDomain struct {
	// Domain is the vendor domain, resolved through the resolver chain.
	Domain string `yaml:"domain" json:"domain"`
	// Port defaults to Config.Port.
	Port int `yaml:"port" json:"port"`
	// ServerName is the TLS server name. Default Domain.
	ServerName string `yaml:"server_name" json:"server_name"`
}

// FallbackIP is a load-balancer address dialled without DNS.
type FallbackIP struct {
	// Addr is "ip:port" or "ip" (port Config.Port).
	Addr string `yaml:"addr" json:"addr"`
	// ServerName is the TLS server name. Default: the request's host.
	ServerName string `yaml:"server_name" json:"server_name"`
}

// Defaults of zero-valued fields, filled by withDefaults.
const (
	defaultPort             = 443
	defaultMaxRouteFailures = 3
	defaultNoRouteHold      = 2 * time.Second
	defaultStagger          = 200 * time.Millisecond

	defaultDNSTimeout         = 2 * time.Second
	defaultDoHMethod          = "GET"
	defaultSystemTTL          = time.Minute
	defaultMinTTL             = 10 * time.Second
	defaultMaxTTL             = time.Hour
	defaultMaxStale           = 72 * time.Hour
	defaultStaleAnswerTimeout = 1800 * time.Millisecond // RFC 8767 section 5
	defaultDeadServerHold     = 30 * time.Second
	defaultMaxEntries         = 1024

	defaultSchedulerTimeout = 3 * time.Second
	defaultSchedulerMaxTTL  = time.Hour
	defaultClient           = "veer"

	defaultTCPDelay       = 250 * time.Millisecond
	defaultConnectTimeout = 5 * time.Second
	defaultBrokenBase     = 5 * time.Minute
	defaultBrokenMax      = 2 * time.Hour
)

var (
	defaultSteps = []RouteStep{StepScheduler, StepDirect, StepCDN, StepFallbackIP}
	defaultOrder = []ResolverStep{StepSystem, StepPrivateUDP, StepPrivateRace, StepDoH, StepBootstrap}
)

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	errs = append(errs, validSteps("steps", c.Steps, defaultSteps))
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, config.Field("port", "must be 0..65535, got %d", c.Port))
	}
	if c.MaxRouteFailures < 0 {
		errs = append(errs, config.Field("max_route_failures", "must be >= 0"))
	}
	errs = append(errs, config.In("dns", c.DNS.Validate()))
	errs = append(errs, config.In("scheduler", c.Scheduler.Validate()))
	errs = append(errs, config.In("race", c.Race.Validate()))
	for i, d := range c.CDN {
		p := "cdn[" + strconv.Itoa(i) + "]"
		if _, ok := dns.IsDomainName(d.Domain); !ok || d.Domain == "" {
			errs = append(errs, config.Field(p+".domain", "not a domain name: %q", d.Domain))
		}
		if d.Port < 0 || d.Port > 65535 {
			errs = append(errs, config.Field(p+".port", "must be 0..65535"))
		}
	}
	for i, f := range c.FallbackIPs {
		if _, err := parseAddrPort(f.Addr, 443); err != nil {
			errs = append(errs, config.Field("fallback_ips["+strconv.Itoa(i)+"].addr", "%v", err))
		}
	}
	return errors.Join(errs...)
}

// Validate reports every invalid field.
func (c DNSConfig) Validate() error {
	var errs []error
	errs = append(errs, validSteps("order", c.Order, defaultOrder))
	for i, s := range c.PrivateServers {
		if _, err := parseAddrPort(s, 53); err != nil {
			errs = append(errs, config.Field("private_servers["+strconv.Itoa(i)+"]", "%v", err))
		}
	}
	if c.DoHURL != "" {
		if u, err := url.Parse(c.DoHURL); err != nil || u.Scheme != "https" || u.Host == "" {
			errs = append(errs, config.Field("doh_url", "want an https URL, got %q", c.DoHURL))
		}
	}
	if c.DoHMethod != "" && c.DoHMethod != "GET" && c.DoHMethod != "POST" {
		errs = append(errs, config.Field("doh_method", "want GET or POST, got %q", c.DoHMethod))
	}
	for name, ips := range c.Bootstrap {
		for i, ip := range ips {
			if _, err := netip.ParseAddr(ip); err != nil {
				errs = append(errs, config.Field("bootstrap."+name+"["+strconv.Itoa(i)+"]", "%v", err))
			}
		}
	}
	for name, cidrs := range c.Expected {
		for i, p := range cidrs {
			if _, err := netip.ParsePrefix(p); err != nil {
				errs = append(errs, config.Field("expected."+name+"["+strconv.Itoa(i)+"]", "%v", err))
			}
		}
	}
	for _, d := range []struct {
		f string
		v time.Duration
	}{{"timeout", c.Timeout}, {"system_ttl", c.SystemTTL}, {"min_ttl", c.MinTTL}, {"max_ttl", c.MaxTTL}} {
		if d.v < 0 {
			errs = append(errs, config.Field(d.f, "must be >= 0"))
		}
	}
	if c.MaxTTL > 0 && c.MinTTL > c.MaxTTL {
		errs = append(errs, config.Field("min_ttl", "must be <= max_ttl"))
	}
	if c.MaxEntries < 0 {
		errs = append(errs, config.Field("max_entries", "must be >= 0"))
	}
	return errors.Join(errs...)
}

// Validate reports every invalid field.
func (c SchedulerConfig) Validate() error {
	var errs []error
	if c.URL != "" {
		if u, err := url.Parse(c.URL); err != nil || u.Scheme != "https" || u.Host == "" {
			errs = append(errs, config.Field("url", "want an https URL, got %q", c.URL))
		}
	}
	if c.Timeout < 0 {
		errs = append(errs, config.Field("timeout", "must be >= 0"))
	}
	if c.MaxTTL < 0 {
		errs = append(errs, config.Field("max_ttl", "must be >= 0"))
	}
	return errors.Join(errs...)
}

// Validate reports every invalid field.
func (c RaceConfig) Validate() error {
	var errs []error
	for _, d := range []struct {
		f string
		v time.Duration
	}{{"tcp_delay", c.TCPDelay}, {"connect_timeout", c.ConnectTimeout}, {"broken_base", c.BrokenBase}, {"broken_max", c.BrokenMax}} {
		if d.v < 0 {
			errs = append(errs, config.Field(d.f, "must be >= 0"))
		}
	}
	return errors.Join(errs...)
}

func validSteps[S ~string](field string, steps, known []S) error {
	var errs []error
	seen := map[S]bool{}
	for i, s := range steps {
		if !slices.Contains(known, s) {
			errs = append(errs, config.Field(field+"["+strconv.Itoa(i)+"]", "unknown step %q (known: %v)", s, known))
		}
		if seen[s] {
			errs = append(errs, config.Field(field+"["+strconv.Itoa(i)+"]", "duplicate step %q", s))
		}
		seen[s] = true
	}
	return errors.Join(errs...)
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if len(c.Steps) == 0 {
		c.Steps = defaultSteps
	}
	c.Port = cmp.Or(c.Port, defaultPort)
	c.MaxRouteFailures = cmp.Or(c.MaxRouteFailures, defaultMaxRouteFailures)
	c.NoRouteHold = cmp.Or(c.NoRouteHold, defaultNoRouteHold)
	c.Stagger = cmp.Or(c.Stagger, defaultStagger)
	d := &c.DNS
	if len(d.Order) == 0 {
		d.Order = defaultOrder
	}
	d.Timeout = cmp.Or(d.Timeout, defaultDNSTimeout)
	d.DoHMethod = cmp.Or(d.DoHMethod, defaultDoHMethod)
	d.SystemTTL = cmp.Or(d.SystemTTL, defaultSystemTTL)
	d.MinTTL = cmp.Or(d.MinTTL, defaultMinTTL)
	d.MaxTTL = cmp.Or(d.MaxTTL, defaultMaxTTL)
	d.MaxStale = cmp.Or(d.MaxStale, defaultMaxStale)
	d.StaleAnswerTimeout = cmp.Or(d.StaleAnswerTimeout, defaultStaleAnswerTimeout)
	d.DeadServerHold = cmp.Or(d.DeadServerHold, defaultDeadServerHold)
	d.MaxEntries = cmp.Or(d.MaxEntries, defaultMaxEntries)
	s := &c.Scheduler
	s.Timeout = cmp.Or(s.Timeout, defaultSchedulerTimeout)
	s.MaxTTL = cmp.Or(s.MaxTTL, defaultSchedulerMaxTTL)
	s.Client = cmp.Or(s.Client, defaultClient)
	r := &c.Race
	r.TCPDelay = cmp.Or(r.TCPDelay, defaultTCPDelay)
	r.ConnectTimeout = cmp.Or(r.ConnectTimeout, defaultConnectTimeout)
	r.BrokenBase = cmp.Or(r.BrokenBase, defaultBrokenBase)
	r.BrokenMax = cmp.Or(r.BrokenMax, defaultBrokenMax)
	return c
}

// parseAddrPort parses "ip:port" or a bare "ip" (port def).
func parseAddrPort(s string, def uint16) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.AddrPort{}, errors.New("want ip or ip:port, got " + strconv.Quote(s))
	}
	return netip.AddrPortFrom(a, def), nil
}

// splitHostPort splits a request host, defaulting the port.
func splitHostPort(hostport string, def int) (string, string) {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport, strconv.Itoa(def)
	}
	return h, p
}
