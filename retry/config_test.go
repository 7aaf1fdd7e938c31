package retry

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/internal/must"
)

// TestNewRejectsEachInvalidField: New refuses an invalid field with an
// error naming it, instead of replacing the policy with the default.
func TestNewRejectsEachInvalidField(t *testing.T) {
	tests := []struct {
		field string
		cfg   Config
	}{
		{"max_attempts", Config{MaxAttempts: -2}},
		{"max_attempts", Config{MaxAttempts: MaxMaxAttempts + 1}},
		{"max_attempts", Config{MaxAttempts: -1}}, // no limit needs a deadline
		{"initial", Config{Initial: -1}},
		{"multiplier", Config{Multiplier: 0.5}},
		{"multiplier", Config{Multiplier: 101}},
		{"max_wait", Config{MaxWait: -1}},
		{"deadline", Config{Deadline: -1}},
	}
	for _, tt := range tests {
		r, err := New(tt.cfg, Options{Registerer: prometheus.NewRegistry()})
		if r != nil || strings.Join(config.Fields(err), ",") != tt.field {
			t.Errorf("New(%+v) = %v, %v; want nil and an error naming %s", tt.cfg, r, err, tt.field)
		}
	}
}

// TestNewDefaultsEachZeroField: each zero field takes its named default; a
// set field is kept.
func TestNewDefaultsEachZeroField(t *testing.T) {
	r := must.Get(New(Config{}, Options{Registerer: prometheus.NewRegistry()}))
	want := Config{MaxAttempts: DefaultMaxAttempts, Initial: DefaultInitial, Multiplier: DefaultMultiplier, MaxWait: DefaultMaxWait}
	if r.p != want {
		t.Fatalf("zero config became %+v, want %+v", r.p, want)
	}
	set := Config{MaxAttempts: -1, Initial: time.Second, Multiplier: 3, MaxWait: time.Minute, Deadline: time.Hour, NoJitter: true}
	r = must.Get(New(set, Options{Registerer: prometheus.NewRegistry()}))
	if r.p != set {
		t.Fatalf("set config became %+v, want it unchanged", r.p)
	}
}

func TestNewBudgetRejectsEachInvalidField(t *testing.T) {
	tests := []struct {
		field string
		cfg   BudgetConfig
	}{
		{"ratio", BudgetConfig{Ratio: -0.1}},
		{"ratio", BudgetConfig{Ratio: MaxBudgetRatio + 1}},
		{"min_retries", BudgetConfig{MinRetries: -1}},
		{"interval", BudgetConfig{Interval: -1}},
		// Shorter than the bucket count in nanoseconds, it made buckets of
		// zero width and TryRetryAt divide by zero.
		{"interval", BudgetConfig{Interval: 5}},
	}
	for _, tt := range tests {
		b, err := NewBudget(tt.cfg)
		if b != nil || strings.Join(config.Fields(err), ",") != tt.field {
			t.Errorf("NewBudget(%+v) = %v, %v; want nil and an error naming %s", tt.cfg, b, err, tt.field)
		}
	}
}

func TestNewBudgetDefaultsEachZeroField(t *testing.T) {
	b := must.Get(NewBudget(BudgetConfig{}))
	got := []any{b.ratio, b.min, b.win.Span()}
	want := []any{DefaultBudgetRatio, int64(DefaultBudgetMinRetries), DefaultBudgetInterval}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("zero config: ratio, min, interval = %v, want %v", got, want)
	}
	b = must.Get(NewBudget(BudgetConfig{Ratio: 0.5, MinRetries: 1, Interval: time.Second}))
	got = []any{b.ratio, b.min, b.win.Span()}
	want = []any{0.5, int64(1), time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("set config: ratio, min, interval = %v, want %v", got, want)
	}
}
