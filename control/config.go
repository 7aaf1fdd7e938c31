package control

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storeetcd"
)

// Defaults.
const (
	DefaultDataDir     = "veer-data"
	DefaultListen      = "127.0.0.1:7443"
	DefaultAdminListen = "127.0.0.1:7444"
	// MaxAdminBody bounds an admin request body; larger ones get 413.
	MaxAdminBody = 1 << 20
	// maxPublicBody bounds a route or schedule request body.
	maxPublicBody = 64 << 10
)

// Config is what `veer control --config FILE` says. The zero value works:
// an embedded store in ./veer-data, the public API (routing, scheduling)
// over TLS (HTTP/1.1, HTTP/2, and HTTP/3 on the same UDP port) on
// 127.0.0.1:7443 with a self-signed certificate, the admin API on
// 127.0.0.1:7444 (the gateway's default is 8443).
type Config struct {
	// DataDir holds the embedded store, the signing key, the admin token
	// and a generated certificate; default DefaultDataDir.
	DataDir string `json:"data_dir,omitempty" yaml:"data_dir,omitempty"`
	// Listen is the public API's address (TCP and UDP); default
	// DefaultListen.
	Listen string `json:"listen,omitempty" yaml:"listen,omitempty"`
	// ListenPlain, if set, also serves the public API over plain HTTP/1.1
	// and h2c (behind a TLS-terminating proxy, or for load tests).
	ListenPlain string `json:"listen_plain,omitempty" yaml:"listen_plain,omitempty"`
	// AdminListen is the admin API's address (plain HTTP; keep it on
	// loopback or a management network); default DefaultAdminListen.
	AdminListen string `json:"admin_listen,omitempty" yaml:"admin_listen,omitempty"`
	// CertFile and KeyFile are the public API's TLS certificate; default a
	// self-signed one generated in DataDir.
	CertFile string `json:"cert_file,omitempty" yaml:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty" yaml:"key_file,omitempty"`
	// SigningKeyFile holds the Ed25519 key answers are signed with;
	// default DataDir/routing.key, generated on first start. Instances
	// sharing a store must share this file.
	SigningKeyFile string `json:"signing_key_file,omitempty" yaml:"signing_key_file,omitempty"`
	// AdminTokenFile holds the admin token, generated (mode 0600) on first
	// start; default DataDir/admin.token.
	AdminTokenFile string `json:"admin_token_file,omitempty" yaml:"admin_token_file,omitempty"`
	// Tokens are further API tokens, by the SHA-256 of the secret.
	Tokens []Token `json:"tokens,omitempty" yaml:"tokens,omitempty"`
	// TrustedProxies are CIDRs of load balancers in front of the public
	// API: for a connection from one of them, the client's address (its
	// region) is the right-most X-Forwarded-For address outside them.
	// Default none: the connection's address.
	TrustedProxies []string `json:"trusted_proxies,omitempty" yaml:"trusted_proxies,omitempty"`
	// Etcd, if its endpoints are set, selects the etcd backend instead of
	// the embedded store.
	Etcd storeetcd.Config `json:"etcd,omitempty" yaml:"etcd,omitempty"`
}

// Token is one API token.
type Token struct {
	// Name is recorded as the author of its changes.
	Name string `json:"name" yaml:"name"`
	// Role is viewer, operator or admin.
	Role string `json:"role" yaml:"role"`
	// SHA256 is the hex SHA-256 of the token's secret.
	SHA256 string `json:"sha256" yaml:"sha256"`
}

// Validate names the bad field.
func (c *Config) Validate() error {
	for f, a := range map[string]string{"listen": c.Listen, "listen_plain": c.ListenPlain, "admin_listen": c.AdminListen} {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return config.Field(f, "%q: %v", a, err)
		}
	}
	for i, p := range c.TrustedProxies {
		if _, err := netip.ParsePrefix(p); err != nil {
			return config.Field(fmt.Sprintf("trusted_proxies[%d]", i), "%q: %v", p, err)
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return config.Field("cert_file", "cert_file and key_file go together")
	}
	for i, t := range c.Tokens {
		if err := t.validate(); err != nil {
			return config.In(fmt.Sprintf("tokens[%d]", i), err)
		}
	}
	if len(c.Etcd.Endpoints) > 0 {
		if err := c.Etcd.Validate(); err != nil {
			var fe *storeetcd.FieldError
			if errors.As(err, &fe) {
				return config.Field("etcd."+fe.Field, "%v", fe.Err)
			}
			return config.Field("etcd", "%v", err)
		}
	}
	return nil
}

// AdminURL is the admin API's URL for a client on the same machine (the
// `veer control` CLI with --config): http:// and admin_listen (default
// DefaultAdminListen), an unspecified host (empty, 0.0.0.0, ::) asked on
// loopback.
func (c Config) AdminURL() string {
	c = c.withDefaults()
	host, port, err := net.SplitHostPort(c.AdminListen)
	if err != nil {
		return "http://" + c.AdminListen
	}
	if ip, err := netip.ParseAddr(host); host == "" || err == nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if err == nil && ip.Is6() && !ip.Is4In6() {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// TokenFile is the admin token's file: admin_token_file, default
// data_dir/admin.token (relative paths from the current directory, as the
// service reads them).
func (c Config) TokenFile() string { return c.withDefaults().AdminTokenFile }

func (c Config) withDefaults() Config {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.AdminListen == "" {
		c.AdminListen = DefaultAdminListen
	}
	if c.SigningKeyFile == "" {
		c.SigningKeyFile = filepath.Join(c.DataDir, "routing.key")
	}
	if c.AdminTokenFile == "" {
		c.AdminTokenFile = filepath.Join(c.DataDir, "admin.token")
	}
	return c
}

// Options are run-time wiring; the zero value works.
type Options struct {
	// Store, if set, is used instead of the one Config describes (tests,
	// embedding); the Service does not close it.
	Store store.Store
	// Clock; default clock.Real.
	Clock clock.Clock
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics; default none.
	Registerer prometheus.Registerer
	// Documents are more documents the admin API accepts beyond Documents,
	// each with its validator (errors "key:line: field: problem"); the
	// service does not read them. cmd/veer adds the private DNS's
	// dns/zones. Default none.
	Documents map[string]func([]byte) error
	// UI, if set, wraps the admin listener's handler (the admin API) with
	// the web console (control/console's Console.Mount: /ui/ beside
	// /v1/admin/), given the service's store. Default none.
	UI func(admin http.Handler, st store.Store) http.Handler
	// RolloutInterval is how often the running rollouts are judged on the
	// gateways' counts; default DefaultRolloutInterval.
	RolloutInterval time.Duration
}
