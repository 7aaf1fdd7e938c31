package breaker

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
)

// TestNewRejectsEachInvalidField: New refuses an invalid field with an
// error naming it, instead of replacing the config with defaults.
func TestNewRejectsEachInvalidField(t *testing.T) {
	tests := []struct {
		field string
		cfg   Config
	}{
		{"window", Config{Window: -time.Second}},
		{"buckets", Config{Buckets: -1}},
		{"buckets", Config{Buckets: MaxBuckets + 1}},
		{"min_requests", Config{MinRequests: -1}},
		{"open_for", Config{OpenFor: -1}},
		{"max_probes", Config{MaxProbes: -1}},
		{"probe_successes", Config{ProbeSuccesses: -1}},
		{"levels", Config{Levels: tooManyLevels()}},
		{"levels[0].failure_ratio", Config{Levels: []Level{{FailureRatio: 0, Admit: 0.5}}}},
		{"levels[0].failure_ratio", Config{Levels: []Level{{FailureRatio: 1.5, Admit: 0.5}}}},
		{"levels[0].admit", Config{Levels: []Level{{FailureRatio: 0.5, Admit: 1}}}},
		{"levels[1].failure_ratio", Config{Levels: []Level{{0.5, 0.5}, {0.5, 0.1}}}},
		{"levels[1].admit", Config{Levels: []Level{{0.5, 0.5}, {0.8, 0.6}}}},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			b, err := New(tt.cfg, Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
			if b != nil || strings.Join(config.Fields(err), ",") != tt.field {
				t.Fatalf("New = %v, %v; want nil and an error naming %s", b, err, tt.field)
			}
		})
	}
}

// tooManyLevels returns MaxLevels+1 levels, each valid on its own.
func tooManyLevels() []Level {
	ls := make([]Level, MaxLevels+1)
	for i := range ls {
		ls[i] = Level{FailureRatio: float64(i+1) / float64(len(ls)), Admit: 0}
	}
	return ls
}

// TestNewDefaultsEachZeroField: each zero field takes its named default, a
// set field is kept.
func TestNewDefaultsEachZeroField(t *testing.T) {
	b, err := New(Config{}, Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Window: DefaultWindow, Buckets: DefaultBuckets, MinRequests: DefaultMinRequests, Levels: DefaultLevels,
		OpenFor: DefaultOpenFor, MaxProbes: DefaultMaxProbes, ProbeSuccesses: DefaultProbeSuccesses}
	if !reflect.DeepEqual(b.cfg, want) {
		t.Fatalf("zero config became %+v, want %+v", b.cfg, want)
	}
	if got := b.win.Span(); got != DefaultWindow || b.win.Buckets() != DefaultBuckets {
		t.Fatalf("window spans %v in %d buckets, want %v in %d", got, b.win.Buckets(), DefaultWindow, DefaultBuckets)
	}
	set := Config{Window: time.Second, Buckets: 4, MinRequests: 7, Levels: []Level{{0.9, 0}}, OpenFor: time.Minute, MaxProbes: 2, ProbeSuccesses: 5}
	b, err = New(set, Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b.cfg, set) {
		t.Fatalf("set config became %+v, want it unchanged", b.cfg)
	}
}

func TestNewThrottleRejectsEachInvalidField(t *testing.T) {
	tests := []struct {
		field string
		cfg   ThrottleConfig
	}{
		{"k", ThrottleConfig{K: 0.5}},
		{"k", ThrottleConfig{K: 1001}},
		{"window", ThrottleConfig{Window: -1}},
		{"buckets", ThrottleConfig{Buckets: -1}},
		{"buckets", ThrottleConfig{Buckets: MaxBuckets + 1}},
	}
	for _, tt := range tests {
		th, err := NewThrottle(tt.cfg, ThrottleOptions{Registerer: prometheus.NewRegistry()})
		if th != nil || strings.Join(config.Fields(err), ",") != tt.field {
			t.Errorf("NewThrottle(%+v) = %v, %v; want nil and an error naming %s", tt.cfg, th, err, tt.field)
		}
	}
}

func TestNewThrottleDefaultsEachZeroField(t *testing.T) {
	th, err := NewThrottle(ThrottleConfig{}, ThrottleOptions{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if th.k != DefaultThrottleK || th.win.Buckets() != DefaultThrottleBuckets || th.win.Span() != DefaultThrottleWindow {
		t.Fatalf("zero config: k %v, %d buckets over %v", th.k, th.win.Buckets(), th.win.Span())
	}
	th, err = NewThrottle(ThrottleConfig{K: 3, Window: time.Second, Buckets: 5}, ThrottleOptions{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if th.k != 3 || th.win.Buckets() != 5 || th.win.Span() != time.Second {
		t.Fatalf("set config: k %v, %d buckets over %v", th.k, th.win.Buckets(), th.win.Span())
	}
}
