package shed

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/tier"
)

// TestApplyRejectsWhatCannotChange: Apply takes every field a config file
// can say, and refuses, naming the field, what it cannot change at run time
// instead of ignoring it. A refused Apply changes nothing.
func TestApplyRejectsWhatCannotChange(t *testing.T) {
	s, _ := newShedder(t, Config{MaxEndpoints: 10, DefaultTier: tier.Sheddable})
	tests := []struct {
		name  string
		cfg   Config
		field string // "" = accepted
	}{
		{"same max_endpoints", Config{MaxEndpoints: 10}, ""},
		{"other max_endpoints", Config{MaxEndpoints: 11}, "max_endpoints"},
		{"max_endpoints defaulted to another value", Config{}, "max_endpoints"},
		{"clock", Config{MaxEndpoints: 10, Clock: clock.Real}, "Clock"},
		{"logger", Config{MaxEndpoints: 10, Logger: obs.Discard}, "Logger"},
		{"endpoint func", Config{MaxEndpoints: 10, Endpoint: func(*http.Request) string { return "" }}, "Endpoint"},
		{"invalid value", Config{MaxEndpoints: 10, MaxQueue: -1}, "max_queue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.DefaultTier = tier.Critical
			err := s.Apply(tt.cfg)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Apply = %v, want nil", err)
				}
				if got := s.Resolve("e", "c", tier.Unset); got != tier.Critical {
					t.Fatalf("accepted Apply did not take effect: default tier %v", got)
				}
				// back to the start for the next case
				if err := s.Apply(Config{MaxEndpoints: 10, DefaultTier: tier.Sheddable}); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.field+":") {
				t.Fatalf("Apply = %v, want an error naming %s", err, tt.field)
			}
			if tt.field != "max_queue" && !errors.Is(err, errFixed) {
				t.Fatalf("Apply = %v, want errFixed", err)
			}
			if got := s.Resolve("e", "c", tier.Unset); got != tier.Sheddable {
				t.Fatalf("refused Apply changed the default tier to %v", got)
			}
		})
	}
}

// An Apply that lowers an endpoint's limit is in force for the next
// request, also on an idle stage (whose tick, which also picks up a new
// policy, runs only while requests queue).
func TestApplyLimitReachesIdleStage(t *testing.T) {
	s, _ := newShedder(t, Config{Limit: LimitConfig{Static: 100}})
	tk, err := s.Acquire(context.Background(), "e", tier.Critical) // the stage exists, idle
	if err != nil {
		t.Fatal(err)
	}
	tk.Release()
	if err := s.Apply(Config{Limit: LimitConfig{Static: 1}}); err != nil {
		t.Fatal(err)
	}
	first, err := s.Acquire(context.Background(), "e", tier.Critical)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release()
	// The slot is taken: a second request must wait, and with its context
	// already done it is refused instead of admitted over the limit.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if second, err := s.Acquire(done, "e", tier.Critical); err == nil {
		second.Release()
		t.Fatal("a second request was admitted over the limit of 1 the Apply set")
	}
}
