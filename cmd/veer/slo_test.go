package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSLORules: `veer gateway slo-rules` turns a config's slo sections into
// a rules file promtool accepts, and names the file, line and field of an
// SLO it cannot express.
func TestSLORules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install Debian's prometheus package (scripts/test-deps.sh does)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.yaml")
	os.WriteFile(cfg, []byte(`routes:
  - name: api
    clusters: [{name: c}]
    slo: {availability: 99.95, latency: 250ms}
  - name: static
    clusters: [{name: c}]
clusters:
  - {name: c, backends: [{address: 127.0.0.1:9}]}
`), 0o600)
	out, err := run(t, "gateway", "slo-rules", "--config", cfg)
	if err != nil || !strings.Contains(out, `route: "api"`) || strings.Contains(out, `"static"`) {
		t.Fatalf("slo-rules: %v\n%s", err, out)
	}
	rules := filepath.Join(dir, "rules.yaml")
	os.WriteFile(rules, []byte(out), 0o600)
	if b, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, b)
	}
	os.WriteFile(cfg, []byte(`routes:
  - name: api
    clusters: [{name: c}]
    slo:
      availability: 99.9
      latency: 300ms
clusters:
  - {name: c, backends: [{address: 127.0.0.1:9}]}
`), 0o600)
	if _, err := run(t, "gateway", "slo-rules", "--config", cfg); err == nil || !strings.Contains(err.Error(), cfg+":6: routes[0].slo.latency: 300ms: not a bucket boundary") {
		t.Fatalf("bad latency: %v", err)
	}
}
