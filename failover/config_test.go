package failover

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/veerhq/veer/config"
)

// fieldsOf lists the fields named by the FieldErrors in err.
func fieldsOf(err error) []string { return config.Fields(err) }

func TestValidate(t *testing.T) {
	good := Config{Primary: "api.example.com", Backups: []string{"dc1.example.com:8443"}}
	cases := []struct {
		name   string
		mod    func(*Config)
		fields []string
	}{
		{"valid", func(*Config) {}, nil},
		{"ipv6 with port", func(c *Config) { c.Primary = "[::1]:443" }, nil},
		{"no primary", func(c *Config) { c.Primary = "" }, []string{"primary"}},
		{"primary with scheme", func(c *Config) { c.Primary = "https://api.example.com" }, []string{"primary"}},
		{"bad port", func(c *Config) { c.Primary = "api.example.com:http" }, []string{"primary"}},
		{"no backups", func(c *Config) { c.Backups = nil }, []string{"backups"}},
		{"backup equals primary", func(c *Config) { c.Backups = []string{"dc1", "API.example.com"} }, []string{"backups[1]"}},
		{"repeated backup", func(c *Config) { c.Backups = []string{"dc1", "dc2", "dc1"} }, []string{"backups[2]"}},
		{"bad backup", func(c *Config) { c.Backups = []string{"dc1/x"} }, []string{"backups[0]"}},
		{"negative threshold", func(c *Config) { c.FailureThreshold = -1 }, []string{"failure_threshold"}},
		{"huge threshold", func(c *Config) { c.FailureThreshold = maxThreshold + 1 }, []string{"failure_threshold"}},
		{"negative durations", func(c *Config) {
			c.FailureWindow, c.FailureTimeout, c.RecoveryTimeout = -1, -time.Second, -1
			c.RecoveryTimeoutStep, c.RecoveryDecay, c.CanaryTimeout, c.CanaryRetryInterval = -1, -1, -1, -1
		}, []string{"canary_timeout", "canary_retry_interval", "failure_window", "failure_timeout", "recovery_timeout", "recovery_timeout_step", "recovery_decay"}},
		{"cap below first delay", func(c *Config) { c.RecoveryTimeout, c.RecoveryTimeoutMax = time.Minute, time.Second }, []string{"recovery_timeout_max"}},
		{"negative retry cap", func(c *Config) { c.CanaryRetryMax = -1 }, []string{"canary_retry_max"}},
		{"retry cap below the interval", func(c *Config) { c.CanaryRetryInterval, c.CanaryRetryMax = time.Minute, time.Second }, []string{"canary_retry_max"}},
		{"retry interval above the default cap", func(c *Config) { c.CanaryRetryInterval = time.Minute }, nil},
		{"canary path", func(c *Config) { c.CanaryPath = "health" }, []string{"canary_path"}},
		{"canary scheme", func(c *Config) { c.CanaryScheme = "ftp" }, []string{"canary_scheme"}},
		{"policy", func(c *Config) { c.Policy = "random" }, []string{"policy"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			c.Backups = slices.Clone(good.Backups)
			tc.mod(&c)
			err := c.Validate()
			got := fieldsOf(err)
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("fields %q, want %q (err: %v)", got, tc.fields, err)
			}
			for name, mk := range map[string]func(Config) error{
				"uber":        func(c Config) error { _, err := NewUber(c); return err },
				"round_robin": func(c Config) error { _, err := NewRoundRobin(c); return err },
				"threshold":   func(c Config) error { _, err := NewThreshold(c); return err },
			} {
				if e := mk(c); (e != nil) != (tc.fields != nil) {
					t.Errorf("New %s: err %v, want error: %v", name, e, tc.fields != nil)
				}
			}
		})
	}
}

// TestConfigFile: the config loads from YAML with durations and the
// errors carry the file line.
func TestConfigFile(t *testing.T) {
	var c Config
	err := config.Parse([]byte("primary: api.example.com\nbackups: [dc1.example.com]\nfailure_window: 5s\nrecovery_timeout_max: 2m\ncanary_retry_max: 1m\nconfirm_primary: true\n"), "f.yaml", &c)
	if err != nil {
		t.Fatal(err)
	}
	if c.FailureWindow != 5*time.Second || c.RecoveryTimeoutMax != 2*time.Minute || c.CanaryRetryMax != time.Minute || !c.ConfirmPrimary {
		t.Fatalf("decoded %+v", c)
	}
	err = config.Parse([]byte("primary: api.example.com\nbackups:\n  - dc1\n  - api.example.com\n"), "f.yaml", &c)
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Field != "backups[1]" || fe.Line != 4 {
		t.Fatalf("err %v, want backups[1] at line 4", err)
	}
}
