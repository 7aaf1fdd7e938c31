package routing

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
)

// DefaultTimeout bounds the launch-time call.
const DefaultTimeout = 5 * time.Second

// Config is what an app's config file says about the routing service.
type Config struct {
	// URL of the routing service, e.g. https://wap.example.com/v1/route
	// (required; the service lives under the default domain).
	URL string `json:"url" yaml:"url"`
	// PublicKeys are the service's Ed25519 public keys, standard base64
	// (required, at least one; several allow key rotation).
	PublicKeys []string `json:"public_keys" yaml:"public_keys"`
	// DefaultDomain is used when neither the service nor a persisted answer
	// is available (required).
	DefaultDomain string `json:"default_domain" yaml:"default_domain"`
	// DefaultBackups go with DefaultDomain in the fallback answer, and stand
	// in for the backups of an answer that names none, so that a Result holds
	// a backup for failover.Config whatever the service said. Name at least
	// one: without it, the fallback answer's only domain is DefaultDomain
	// and failover.NewTransport refuses a Config without a backup.
	DefaultBackups []string `json:"default_backups,omitempty" yaml:"default_backups,omitempty"`
	// StateFile persists the last verified answer; empty: none.
	StateFile string `json:"state_file,omitempty" yaml:"state_file,omitempty"`
	// Timeout bounds the call; default DefaultTimeout.
	Timeout time.Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
}

// Validate names the bad field.
func (c Config) Validate() error {
	if u, err := url.Parse(c.URL); c.URL == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return config.Field("url", "%q: want an http(s) URL", c.URL)
	}
	if len(c.PublicKeys) == 0 {
		return config.Field("public_keys", "at least one public key is required")
	}
	for i, k := range c.PublicKeys {
		if _, err := ParsePublicKey(k); err != nil {
			return config.Field(fmt.Sprintf("public_keys[%d]", i), "%v", err)
		}
	}
	if !ValidDomain(c.DefaultDomain) {
		return config.Field("default_domain", "%q: want a domain", c.DefaultDomain)
	}
	for i, b := range c.DefaultBackups {
		if !ValidDomain(b) || b == c.DefaultDomain {
			return config.Field(fmt.Sprintf("default_backups[%d]", i), "%q: want a domain other than default_domain", b)
		}
	}
	if c.Timeout < 0 {
		return config.Field("timeout", "negative")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

func (c Config) keys() []ed25519.PublicKey {
	out := make([]ed25519.PublicKey, 0, len(c.PublicKeys))
	for _, k := range c.PublicKeys {
		if p, err := ParsePublicKey(k); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// Options are run-time wiring; the zero value works.
type Options struct {
	// Client carries the call (e.g. over lastmile's Transport); default
	// http.DefaultClient.
	Client *http.Client
	// Clock decides whether a persisted answer is within its TTL; default
	// clock.Real.
	Clock clock.Clock
	// Logger receives warnings (corrupt state file, failed call); default
	// slog.Default().
	Logger *slog.Logger
}
