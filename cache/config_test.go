package cache

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
)

func loadKey(_ context.Context, key string) (string, error) { return key, nil }

// TestNewRejectsEachInvalidField: New refuses an invalid field with an
// error naming it, instead of replacing the config with defaults.
func TestNewRejectsEachInvalidField(t *testing.T) {
	tests := []struct {
		field string
		cfg   Config
	}{
		{"ttl", Config{TTL: -1}},
		{"max_stale", Config{MaxStale: -1}},
		{"max_stale", Config{TTL: time.Hour, MaxStale: time.Minute}},
		// against the default TTL: this used to be raised to 1m silently
		{"max_stale", Config{MaxStale: 30 * time.Second}},
		{"error_backoff", Config{ErrorBackoff: -1}},
		{"load_timeout", Config{LoadTimeout: -1}},
		{"max_entries", Config{MaxEntries: -1}},
	}
	for _, tt := range tests {
		c, err := New(tt.cfg, loadKey, Options{Registerer: prometheus.NewRegistry()})
		if c != nil || strings.Join(config.Fields(err), ",") != tt.field {
			t.Errorf("New(%+v) = %v, %v; want nil and an error naming %s", tt.cfg, c, err, tt.field)
		}
	}
	if c, err := New[string](Config{}, nil, Options{Registerer: prometheus.NewRegistry()}); c != nil || !errors.Is(err, ErrNoLoader) {
		t.Errorf("New with a nil loader = %v, %v; want ErrNoLoader", c, err)
	}
}

// TestNewDefaultsEachZeroField: each zero field takes its named default; a
// set field is kept.
func TestNewDefaultsEachZeroField(t *testing.T) {
	tests := []struct {
		cfg, want Config
	}{
		{Config{}, Config{TTL: DefaultTTL, MaxStale: DefaultMaxStale, ErrorBackoff: DefaultErrorBackoff, LoadTimeout: DefaultLoadTimeout, MaxEntries: DefaultMaxEntries}},
		// a TTL longer than the default MaxStale raises it: stale values
		// are served at least as long as fresh ones
		{Config{TTL: 48 * time.Hour}, Config{TTL: 48 * time.Hour, MaxStale: 48 * time.Hour, ErrorBackoff: DefaultErrorBackoff, LoadTimeout: DefaultLoadTimeout, MaxEntries: DefaultMaxEntries}},
		{Config{TTL: time.Second, MaxStale: time.Hour, ErrorBackoff: time.Millisecond, LoadTimeout: time.Minute, MaxEntries: 3},
			Config{TTL: time.Second, MaxStale: time.Hour, ErrorBackoff: time.Millisecond, LoadTimeout: time.Minute, MaxEntries: 3}},
	}
	for _, tt := range tests {
		c, err := New(tt.cfg, loadKey, Options{Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		if c.cfg != tt.want {
			t.Errorf("New(%+v) runs with %+v, want %+v", tt.cfg, c.cfg, tt.want)
		}
	}
}
