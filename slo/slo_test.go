package slo

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/config"
)

var buckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func TestObjectiveValidate(t *testing.T) {
	rows := []struct {
		o     Objective
		field string
	}{
		{Objective{Availability: 99.9, Latency: 250 * time.Millisecond}, ""},
		{Objective{Availability: 100}, "availability"},
		{Objective{}, "availability"},
		{Objective{Availability: 99.9, Latency: 300 * time.Millisecond}, "latency"},
		{Objective{Availability: 99.9, Latency: time.Second, LatencyTarget: 100}, "latency_target"},
	}
	for _, r := range rows {
		err := r.o.Validate(buckets)
		if got := config.Fields(err); r.field == "" && err != nil || r.field != "" && !slices.Contains(got, r.field) {
			t.Errorf("%+v: %v, want field %q", r.o, err, r.field)
		}
	}
}

// TestDowntime is docs/release.md's error-budget table.
func TestDowntime(t *testing.T) {
	year, month := 365*24*time.Hour, 30*24*time.Hour
	rows := []struct {
		a      float64
		period time.Duration
		want   time.Duration
	}{
		{99.999, year, 5*time.Minute + 15*time.Second},
		{99.99, year, 52*time.Minute + 34*time.Second},
		{99.9, year, 8*time.Hour + 45*time.Minute + 36*time.Second},
		{99.999, month, 26 * time.Second},
		{99.99, month, 4*time.Minute + 19*time.Second},
		{99.9, month, 43*time.Minute + 12*time.Second},
	}
	for _, r := range rows {
		if got := Downtime(r.a, r.period).Round(time.Second); got != r.want {
			t.Errorf("%v %% of %v: %v, want %v", r.a, r.period, got, r.want)
		}
	}
}

// promtoolTest replays a synthetic outage and a healthy series through the
// generated rules with Prometheus's own rule evaluator: the page alert
// fires within the workbook's windows and the healthy series stays silent.
const promtoolTest = `rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  # 100 req/s; from minute 60 on, 9 % of them fail (SLO 99.9 %: 90x the budget).
  - interval: 1m
    input_series:
      - series: 'veer_gateway_requests_total{route="api",kind="success"}'
        values: '0+6000x200'
      - series: 'veer_gateway_requests_total{route="api",kind="server_error"}'
        values: '0x60 0+600x140'
      - series: 'veer_gateway_requests_total{route="api",kind="client_error"}'
        values: '0+60x200'
      - series: 'veer_gateway_request_duration_seconds_bucket{route="api",le="0.25"}'
        values: '0+6600x200'
      - series: 'veer_gateway_request_duration_seconds_count{route="api"}'
        values: '0+6600x200'
    alert_rule_test:
      - eval_time: 59m
        alertname: VeerSLOBurnPage
        exp_alerts: []
      - eval_time: 65m
        alertname: VeerSLOBurnPage
        exp_alerts: []
      - eval_time: 74m
        alertname: VeerSLOBurnPage
        exp_alerts:
          - exp_labels: {severity: page, route: api, sli: availability}
            exp_annotations:
              summary: "route api burns its availability error budget (SLO 99.9 %) too fast"
  # Healthy: 0.05 % errors (half the budget), 4xx and all fast: never an alert.
  - interval: 1m
    input_series:
      - series: 'veer_gateway_requests_total{route="api",kind="success"}'
        values: '0+6000x300'
      - series: 'veer_gateway_requests_total{route="api",kind="server_error"}'
        values: '0+3x300'
      - series: 'veer_gateway_requests_total{route="api",kind="client_error"}'
        values: '0+600x300'
      - series: 'veer_gateway_request_duration_seconds_bucket{route="api",le="0.25"}'
        values: '0+6603x300'
      - series: 'veer_gateway_request_duration_seconds_count{route="api"}'
        values: '0+6603x300'
    alert_rule_test:
      - {eval_time: 30m, alertname: VeerSLOBurnPage, exp_alerts: []}
      - {eval_time: 5h, alertname: VeerSLOBurnPage, exp_alerts: []}
      - {eval_time: 5h, alertname: VeerSLOBurnTicket, exp_alerts: []}
  # Slow: from minute 60 on, 20 % of requests over 250 ms (latency SLO 99 %).
  - interval: 1m
    input_series:
      - series: 'veer_gateway_requests_total{route="api",kind="success"}'
        values: '0+6000x200'
      - series: 'veer_gateway_request_duration_seconds_bucket{route="api",le="0.25"}'
        values: '0+6000x60 360000+4800x140'
      - series: 'veer_gateway_request_duration_seconds_count{route="api"}'
        values: '0+6000x200'
    alert_rule_test:
      - eval_time: 59m
        alertname: VeerSLOBurnPage
        exp_alerts: []
      - eval_time: 90m
        alertname: VeerSLOBurnPage
        exp_alerts:
          - exp_labels: {severity: page, route: api, sli: latency}
            exp_annotations:
              summary: "route api burns its latency error budget (SLO 99 %) too fast"
`

func TestRulesWithPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install Debian's prometheus package (scripts/test-deps.sh does)")
	}
	rules := Rules(GatewayMetrics, []Route{{Name: "api", Objective: Objective{Availability: 99.9, Latency: 250 * time.Millisecond}}})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "test.yaml"), []byte(promtoolTest), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s\nrules:\n%s", strings.Join(args, " "), err, out, rules)
		}
	}
}
