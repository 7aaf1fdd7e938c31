package watch_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/config/watch"
	"github.com/veerhq/veer/internal/metrictest"
	"github.com/veerhq/veer/obs"
)

type testConfig struct {
	Listen string `yaml:"listen" json:"listen"`
	Limits struct {
		Rate int `yaml:"rate" json:"rate"`
	} `yaml:"limits" json:"limits"`
}

func (c *testConfig) Validate() error {
	if c.Limits.Rate < 0 {
		return config.Field("limits.rate", "must not be negative")
	}
	return nil
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writeAtomic replaces path the way editors and config managers do: write a
// temporary file beside it, then rename it over the original.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits for the next applied config, with a generous bound so a
// missing reload fails instead of hanging.
func waitFor(t *testing.T, ch <-chan *testConfig) *testConfig {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no reload within 10s")
		return nil
	}
}

func TestWatchReloadsAndKeepsOldOnInvalid(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "veer.yaml")
	writeAtomic(t, path, "listen: one\n")

	reg := prometheus.NewRegistry()
	applied := make(chan *testConfig, 8)
	w, err := watch.File(path, watch.Options{Name: "test", Registerer: reg, Logger: obs.Discard, Debounce: 20 * time.Millisecond},
		func(c testConfig) error { applied <- &c; return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if c := waitFor(t, applied); c.Listen != "one" {
		t.Fatalf("initial apply %q", c.Listen)
	}

	// Atomic rename-and-replace is seen.
	writeAtomic(t, path, "listen: two\n")
	c := waitFor(t, applied)
	// apply runs before the watcher stores the config it accepted; Reload
	// takes the watcher's lock, so it returns once that store is done (the
	// file is unchanged: nothing is applied again).
	if err := w.Reload(); err != nil {
		t.Fatal(err)
	}
	if c.Listen != "two" || w.Current().Listen != "two" {
		t.Fatalf("after replace: applied %q current %q", c.Listen, w.Current().Listen)
	}

	// An invalid file is rejected; the old config stays.
	writeAtomic(t, path, "listen: three\nlimits:\n  rate: -5\n")
	err = waitForErr(t, w)
	if !strings.Contains(err.Error(), "limits.rate") {
		t.Fatalf("reload error %v does not name the field", err)
	}
	if w.Current().Listen != "two" {
		t.Fatalf("invalid file replaced the config: %q", w.Current().Listen)
	}
	if n := metrictest.Sum(t, reg, "veer_config_reloads_total", map[string]string{"config": "test", "result": "invalid"}); n < 1 {
		t.Fatalf("invalid reloads counted %v", n)
	}

	// An in-place write is seen too.
	if err := os.WriteFile(path, []byte("listen: four\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := waitFor(t, applied); c.Listen != "four" {
		t.Fatalf("after write: %q", c.Listen)
	}
	if err := w.Reload(); err != nil { // waits for the reload's bookkeeping
		t.Fatal(err)
	}
	if n := metrictest.Sum(t, reg, "veer_config_reloads_total", map[string]string{"config": "test", "result": "ok"}); n < 2 {
		t.Fatalf("ok reloads counted %v, want >= 2", n)
	}
	if errs := obs.Lint(reg); len(errs) > 0 {
		t.Fatal(errs)
	}
}

// waitForErr returns the error that keeps the old config: the invalid file
// is on disk, so Reload reports it whether or not the watcher's own reload
// has run yet.
func waitForErr(t *testing.T, w *watch.Watcher[testConfig]) error {
	t.Helper()
	err := w.Reload()
	if err == nil {
		t.Fatal("Reload of an invalid file returned nil")
	}
	return err
}

func TestWatchRejectsInvalidStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	writeAtomic(t, path, "limits:\n  rate: -1\n")
	_, err := watch.File(path, watch.Options{Registerer: prometheus.NewRegistry()}, func(testConfig) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:2") {
		t.Fatalf("Watch of an invalid file: %v", err)
	}
	_, err = watch.File(filepath.Join(t.TempDir(), "missing.yaml"), watch.Options{Registerer: prometheus.NewRegistry()}, func(testConfig) error { return nil })
	if !os.IsNotExist(err) {
		t.Fatalf("Watch of a missing file: %v", err)
	}
}

// errFrozen is what the apply function of TestApplyErrorIsARejectedReload
// returns for a listen address it cannot change at run time.
var errFrozen = errors.New("cannot change at run time")

// TestApplyErrorIsARejectedReload: a version that parses and validates but
// that apply refuses is rejected like an invalid one: the error names the
// file, the line and the field, the old config stays current, and the reload
// is counted as invalid. Reloads are explicit (a long debounce keeps the
// watcher's own out of the way), so the test needs no sleep.
func TestApplyErrorIsARejectedReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "veer.yaml")
	writeAtomic(t, path, "listen: one\nlimits:\n  rate: 1\n")
	reg := prometheus.NewRegistry()
	var applied []string
	apply := func(c testConfig) error {
		if len(applied) > 0 && c.Listen != applied[0] {
			return config.Field("listen", "%w", errFrozen)
		}
		applied = append(applied, c.Listen)
		return nil
	}
	w, err := watch.File(path, watch.Options{Name: "test", Registerer: reg, Logger: obs.Discard, Debounce: time.Hour}, apply)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	writeAtomic(t, path, "limits:\n  rate: 2\nlisten: two\n")
	err = w.Reload()
	if !errors.Is(err, errFrozen) || !strings.Contains(err.Error(), "veer.yaml:3: listen:") {
		t.Fatalf("Reload = %v, want errFrozen at veer.yaml:3: listen", err)
	}
	if got := w.Current(); got.Listen != "one" || got.Limits.Rate != 1 {
		t.Fatalf("refused reload replaced the config: %+v", *got)
	}
	if n := metrictest.Sum(t, reg, "veer_config_reloads_total", map[string]string{"config": "test", "result": "invalid"}); n != 1 {
		t.Fatalf("invalid reloads counted %v, want 1", n)
	}

	writeAtomic(t, path, "listen: one\nlimits:\n  rate: 3\n")
	if err := w.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := w.Current(); got.Limits.Rate != 3 || len(applied) != 2 {
		t.Fatalf("accepted reload: current %+v, applied %v", *got, applied)
	}
}

func TestApplyErrorAtStartFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "veer.yaml")
	writeAtomic(t, path, "listen: one\n")
	_, err := watch.File(path, watch.Options{Registerer: prometheus.NewRegistry()}, func(testConfig) error { return errFrozen })
	if !errors.Is(err, errFrozen) {
		t.Fatalf("File with a refusing apply: %v", err)
	}
	_, err = watch.File(path, watch.Options{Registerer: prometheus.NewRegistry(), Debounce: -1}, func(testConfig) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "debounce") {
		t.Fatalf("negative debounce: %v", err)
	}
}
