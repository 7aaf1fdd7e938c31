package slo

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDashboard: the Grafana model parses, every panel has a query, and
// every query is PromQL that Prometheus's own parser accepts (promtool
// checks each as a recording rule).
func TestDashboard(t *testing.T) {
	b, err := Dashboard("veer gateway", GatewayPanels)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			GridPos map[string]int
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Panels) != len(GatewayPanels) {
		t.Fatalf("%d panels", len(d.Panels))
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, p := range d.Panels {
		if len(p.Targets) == 0 || p.GridPos["w"] != 12 {
			t.Fatalf("panel %q: %+v", p.Title, p)
		}
		for j, q := range p.Targets {
			fmt.Fprintf(&rules, "      - record: veer:dashboard_panel_%d_%d\n        expr: %q\n", i, j, q.Expr)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install Debian's prometheus package (scripts/test-deps.sh does)")
	}
	path := filepath.Join(t.TempDir(), "queries.yaml")
	os.WriteFile(path, []byte(rules.String()), 0o644)
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, rules.String())
	}
}
