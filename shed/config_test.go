package shed

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/config/watch"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/tier"
)

const sampleYAML = `
target: 5ms
interval: 100ms
default_tier: sheddable_plus
trusted_callers: [gateway]
limit:
  max: 500
endpoints:
  - name: "GET /trips/{id}"
    limit: {static: 50}
    callers:
      checkout: critical
      batch: sheddable
`

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(sampleYAML), "shed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Target != 5*time.Millisecond || c.Limit.Max != 500 || c.Endpoints[0].Limit.Static != 50 ||
		c.Endpoints[0].Callers["checkout"] != tier.Critical || c.TrustedCallers[0] != "gateway" {
		t.Fatalf("parsed %+v", c)
	}
	if _, err := ParseConfig(nil, "empty.yaml"); err != nil {
		t.Fatalf("empty config (the zero value) rejected: %v", err)
	}
}

func TestParseConfigErrorsNameFieldAndLine(t *testing.T) {
	tests := []struct {
		name, yaml, field string
		line              int
	}{
		{"negative target", "target: -1ms\n", "target", 1},
		{"interval below target", "target: 10ms\ninterval: 5ms\n", "interval", 2},
		{"bad tolerance", "limit:\n  tolerance: 0.5\n", "limit.tolerance", 2},
		{"min above max", "limit:\n  min: 10\n  max: 5\n", "limit.max", 3},
		{"unnamed endpoint", "endpoints:\n  - callers: {a: critical}\n", "endpoints[0].name", 2},
		{"duplicate endpoint", "endpoints:\n  - name: a\n  - name: a\n", "endpoints[1].name", 3},
		{"never shed everything", "never_shed: sheddable\n", "never_shed", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.yaml), "f.yaml")
			var fe *config.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err %v, want a FieldError", err)
			}
			if fe.Field != tt.field || fe.Line != tt.line {
				t.Fatalf("error %q names field %q line %d, want %q line %d", err, fe.Field, fe.Line, tt.field, tt.line)
			}
		})
	}
	for _, bad := range []string{"unknown: 1\n", "default_tier: platinum\n", "target: soon\n"} {
		var pe *config.ParseError
		if _, err := ParseConfig([]byte(bad), "f.yaml"); !errors.As(err, &pe) {
			t.Errorf("%q: err %v, want a ParseError", bad, err)
		}
	}
}

// TestWatchReloadKeepsOldTableOnInvalidFile hot-reloads a real file through
// config/watch: a valid change takes effect, an invalid one is logged and
// the previous table stays.
func TestWatchReloadKeepsOldTableOnInvalidFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shed.yaml")
	write := func(s string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("endpoints:\n  - name: e\n    callers: {batch: sheddable}\n")
	var logs bytes.Buffer
	s, _ := newShedder(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	// A long debounce keeps the watcher's own reloads out of the way; the
	// test reloads explicitly (as SIGHUP would) so it needs no sleep.
	w, err := watch.File(path, watch.Options{Registerer: prometheus.NewRegistry(), Debounce: time.Hour, Logger: obs.Discard}, s.Apply)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := s.Resolve("e", "batch", tier.Unset); got != tier.Sheddable {
		t.Fatalf("initial table: batch is %v, want sheddable", got)
	}
	write("endpoints:\n  - name: e\n    callers: {batch: critical}\n")
	if err := w.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := s.Resolve("e", "batch", tier.Unset); got != tier.Critical {
		t.Fatalf("after a valid reload: batch is %v, want critical", got)
	}
	write("endpoints:\n  - name: e\n    callers: {batch: platinum}\n")
	if err := w.Reload(); err == nil {
		t.Fatal("invalid file reloaded without error")
	}
	if got := s.Resolve("e", "batch", tier.Unset); got != tier.Critical {
		t.Fatalf("after an invalid reload: batch is %v, want the old critical", got)
	}
	write("interval: 1ms\ntarget: 2ms\n")
	if err := w.Reload(); err == nil || !strings.Contains(err.Error(), "interval") {
		t.Fatalf("invalid values: %v, want an error naming interval", err)
	}
	if got := s.Resolve("e", "batch", tier.Unset); got != tier.Critical {
		t.Fatalf("after an invalid reload: batch is %v, want the old critical", got)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(sampleYAML))
	f.Add([]byte("{\"target\": \"5ms\", \"endpoints\": [{\"name\": \"a\"}]}"))
	f.Add([]byte("limit: {static: -1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data, "fuzz.yaml")
		if err != nil {
			return
		}
		// Whatever parses must validate and build a working Shedder.
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config fails Validate: %v", err)
		}
		c.Registerer = prometheus.NewRegistry()
		c.Logger = obs.Discard
		s, err := New(*c)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		s.Close()
	})
}

// A zero Config (every tier Unset) survives a JSON round trip: the control
// plane stores and publishes the criticality table as JSON (found by its
// fuzz target: Unset marshalled as "unset", which the decoder refused).
func TestConfigJSONRoundTrip(t *testing.T) {
	in := Config{Endpoints: []EndpointConfig{{Name: "GET /trips", Callers: map[string]tier.Tier{"rider": tier.Critical}}}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Config
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if out.DefaultTier != tier.Unset || out.NeverShed != tier.Unset || out.Endpoints[0].Callers["rider"] != tier.Critical {
		t.Fatalf("round trip changed the config: %+v", out)
	}
	if err := out.Validate(); err != nil {
		t.Fatal(err)
	}
}
