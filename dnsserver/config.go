package dnsserver

import (
	"cmp"
	"errors"
	"net/netip"
	"time"

	"github.com/veerhq/veer/config"
)

// Defaults of Config's zero fields.
const (
	DefaultListen         = ":53"
	DefaultUDPSize        = 1232 // DNS flag day 2020: no IP fragmentation
	DefaultMaxAnswerBytes = 8192
	DefaultAmplification  = 10
	DefaultMaxTCPConns    = 1024
	DefaultTCPIdle        = 10 * time.Second
	DefaultDoHPath        = "/dns-query"
	DefaultHealthInterval = 5 * time.Second
	DefaultHealthTimeout  = 2 * time.Second
	DefaultSlip           = 2
	DefaultRRLIPv4Prefix  = 24
	DefaultRRLIPv6Prefix  = 56
	DefaultRRLMaxClients  = 100000
	DefaultTTL            = 300
	DefaultAccessTTL      = 30
)

// Config is what a `veer dns` config file says. The zero value is a server
// on DefaultListen with no zones (every query REFUSED). Listener fields
// (listen, dot_listen, doh_listen, tls_*, udp_workers) are fixed at start;
// Server.Apply rejects a change to them and applies everything else.
type Config struct {
	// Listen is the UDP and TCP address (same port). Default ":53".
	Listen string `yaml:"listen" json:"listen"`
	// UDPWorkers is the number of goroutines reading the UDP socket.
	// Default GOMAXPROCS.
	UDPWorkers int `yaml:"udp_workers" json:"udp_workers"`
	// UDPSize is the largest UDP response sent, advertised in EDNS0; a
	// larger answer is sent truncated (TC) so the client retries over TCP.
	// Clients without EDNS0 get at most 512 bytes. Default 1232; 512..4096.
	UDPSize int `yaml:"udp_size" json:"udp_size"`
	// MaxAnswerBytes caps every response, over any transport: records that
	// do not fit are left out and TC is set. Default 8192; 512..65535.
	MaxAnswerBytes int `yaml:"max_answer_bytes" json:"max_answer_bytes"`
	// Amplification bounds a UDP response to this many times the size of
	// its query; a larger one is replaced by an empty truncated answer.
	// Default 10; at least 1.
	Amplification int `yaml:"amplification" json:"amplification"`
	// MaxTCPConns bounds open TCP and DoT connections; more are closed at
	// once. Default 1024.
	MaxTCPConns int `yaml:"max_tcp_conns" json:"max_tcp_conns"`
	// TCPIdle closes a TCP or DoT connection idle this long. Default 10s.
	TCPIdle time.Duration `yaml:"tcp_idle" json:"tcp_idle"`
	// TLS is the certificate of DoT and DoH. Required when either is on.
	TLS TLSConfig `yaml:"tls" json:"tls"`
	// DoTListen is the DNS-over-TLS address (RFC 7858). Default none (off).
	DoTListen string `yaml:"dot_listen" json:"dot_listen"`
	// DoHListen is the DNS-over-HTTPS address (RFC 8484): HTTP/2 over TCP
	// and HTTP/3 over UDP on the same port. Default none (off).
	DoHListen string `yaml:"doh_listen" json:"doh_listen"`
	// DoHPath is the DoH endpoint's path. Default "/dns-query".
	DoHPath string `yaml:"doh_path" json:"doh_path"`
	// RRL is response rate limiting. Default off.
	RRL RRLConfig `yaml:"rrl" json:"rrl"`
	// Health configures the access nodes' health checks.
	Health HealthConfig `yaml:"health" json:"health"`
	// Data is the served content: zones, access domains, region table.
	Data `yaml:",inline" json:",inline"`
}

// TLSConfig names certificate files (PEM).
type TLSConfig struct {
	// Cert is the certificate chain file. Default none.
	Cert string `yaml:"cert" json:"cert"`
	// Key is the private key file. Default none.
	Key string `yaml:"key" json:"key"`
}

// RRLConfig is response rate limiting per client prefix, on UDP only (TCP,
// DoT and DoH clients proved their address with a handshake). A client
// prefix over its rate gets no answer, except every Slip-th one, which is
// sent empty with TC set so that a real client behind a spoofed flood can
// still get through over TCP.
type RRLConfig struct {
	// ResponsesPerSecond is each client prefix's rate. Default 0: off.
	ResponsesPerSecond float64 `yaml:"responses_per_second" json:"responses_per_second"`
	// Burst is the bucket size. Default: ResponsesPerSecond (one second).
	Burst int `yaml:"burst" json:"burst"`
	// Slip sends every Slip-th limited response truncated. Default 2; 1..10.
	Slip int `yaml:"slip" json:"slip"`
	// IPv4Prefix and IPv6Prefix group clients. Defaults 24 and 56.
	IPv4Prefix int `yaml:"ipv4_prefix" json:"ipv4_prefix"`
	IPv6Prefix int `yaml:"ipv6_prefix" json:"ipv6_prefix"`
	// MaxClients bounds the prefixes tracked. Default 100000.
	MaxClients int `yaml:"max_clients" json:"max_clients"`
}

// HealthConfig configures the access nodes' health checks.
type HealthConfig struct {
	// Interval between two rounds of checks. Default 5s.
	Interval time.Duration `yaml:"interval" json:"interval"`
	// Timeout of one check. Default 2s; at most Interval.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name, v string
	}{{"listen", c.Listen}, {"dot_listen", c.DoTListen}, {"doh_listen", c.DoHListen}} {
		if f.v == "" {
			continue
		}
		if _, err := netip.ParseAddrPort(hostDefault(f.v)); err != nil {
			errs = append(errs, config.Field(f.name, "want ip:port or :port, got %q", f.v))
		}
	}
	if c.UDPWorkers < 0 {
		errs = append(errs, config.Field("udp_workers", "must not be negative, got %d", c.UDPWorkers))
	}
	if c.UDPSize != 0 && (c.UDPSize < 512 || c.UDPSize > 4096) {
		errs = append(errs, config.Field("udp_size", "must be 512..4096, got %d", c.UDPSize))
	}
	if c.MaxAnswerBytes != 0 && (c.MaxAnswerBytes < 512 || c.MaxAnswerBytes > 65535) {
		errs = append(errs, config.Field("max_answer_bytes", "must be 512..65535, got %d", c.MaxAnswerBytes))
	}
	if c.Amplification < 0 {
		errs = append(errs, config.Field("amplification", "must be at least 1, got %d", c.Amplification))
	}
	if c.MaxTCPConns < 0 {
		errs = append(errs, config.Field("max_tcp_conns", "must not be negative, got %d", c.MaxTCPConns))
	}
	if c.TCPIdle < 0 {
		errs = append(errs, config.Field("tcp_idle", "must not be negative, got %s", c.TCPIdle))
	}
	if (c.DoTListen != "" || c.DoHListen != "") && (c.TLS.Cert == "" || c.TLS.Key == "") {
		errs = append(errs, config.Field("tls", "cert and key are required with dot_listen or doh_listen"))
	}
	if c.DoHPath != "" && c.DoHPath[0] != '/' {
		errs = append(errs, config.Field("doh_path", "must start with /, got %q", c.DoHPath))
	}
	errs = append(errs, config.In("rrl", c.RRL.Validate()), config.In("health", c.Health.Validate()))
	errs = append(errs, c.Data.Validate())
	return errors.Join(errs...)
}

// Validate reports every invalid field.
func (r RRLConfig) Validate() error {
	var errs []error
	if r.ResponsesPerSecond < 0 {
		errs = append(errs, config.Field("responses_per_second", "must not be negative, got %v", r.ResponsesPerSecond))
	}
	if r.Burst < 0 {
		errs = append(errs, config.Field("burst", "must not be negative, got %d", r.Burst))
	}
	if r.Slip < 0 || r.Slip > 10 {
		errs = append(errs, config.Field("slip", "must be 1..10, got %d", r.Slip))
	}
	if r.IPv4Prefix < 0 || r.IPv4Prefix > 32 {
		errs = append(errs, config.Field("ipv4_prefix", "must be 1..32, got %d", r.IPv4Prefix))
	}
	if r.IPv6Prefix < 0 || r.IPv6Prefix > 128 {
		errs = append(errs, config.Field("ipv6_prefix", "must be 1..128, got %d", r.IPv6Prefix))
	}
	if r.MaxClients < 0 {
		errs = append(errs, config.Field("max_clients", "must not be negative, got %d", r.MaxClients))
	}
	return errors.Join(errs...)
}

// Validate reports every invalid field.
func (h HealthConfig) Validate() error {
	var errs []error
	if h.Interval < 0 {
		errs = append(errs, config.Field("interval", "must not be negative, got %s", h.Interval))
	}
	if h.Timeout < 0 {
		errs = append(errs, config.Field("timeout", "must not be negative, got %s", h.Timeout))
	}
	d := h.withDefaults()
	if d.Timeout > d.Interval {
		errs = append(errs, config.Field("timeout", "must not exceed interval (%s), got %s", d.Interval, d.Timeout))
	}
	return errors.Join(errs...)
}

func (h HealthConfig) withDefaults() HealthConfig {
	h.Interval = cmp.Or(h.Interval, DefaultHealthInterval)
	h.Timeout = cmp.Or(h.Timeout, min(DefaultHealthTimeout, h.Interval))
	return h
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults(procs int) Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	c.UDPWorkers = cmp.Or(c.UDPWorkers, procs)
	c.UDPSize = cmp.Or(c.UDPSize, DefaultUDPSize)
	c.MaxAnswerBytes = cmp.Or(c.MaxAnswerBytes, DefaultMaxAnswerBytes)
	c.Amplification = cmp.Or(c.Amplification, DefaultAmplification)
	c.MaxTCPConns = cmp.Or(c.MaxTCPConns, DefaultMaxTCPConns)
	c.TCPIdle = cmp.Or(c.TCPIdle, DefaultTCPIdle)
	if c.DoHPath == "" {
		c.DoHPath = DefaultDoHPath
	}
	r := &c.RRL
	r.Burst = cmp.Or(r.Burst, max(1, int(r.ResponsesPerSecond)))
	r.Slip = cmp.Or(r.Slip, DefaultSlip)
	r.IPv4Prefix = cmp.Or(r.IPv4Prefix, DefaultRRLIPv4Prefix)
	r.IPv6Prefix = cmp.Or(r.IPv6Prefix, DefaultRRLIPv6Prefix)
	r.MaxClients = cmp.Or(r.MaxClients, DefaultRRLMaxClients)
	c.Health = c.Health.withDefaults()
	return c
}

// hostDefault turns ":53" into "0.0.0.0:53" for parsing.
func hostDefault(addr string) string {
	if len(addr) > 0 && addr[0] == ':' {
		return "0.0.0.0" + addr
	}
	return addr
}
