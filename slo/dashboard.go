package slo

import (
	"encoding/json"
)

// Panel is one time series of the dashboard: a title and its queries.
type Panel struct {
	Title   string
	Unit    string // Grafana unit: "reqps", "s", "percentunit", "short"
	Stacked bool
	Queries []Query
}

// Query is a PromQL expression and its legend.
type Query struct {
	Expr, Legend string
}

// GatewayPanels are the key paths of a veer gateway, from its own metrics:
// traffic, errors by outcome kind, latency, shed by tier, limited by
// dimension, breaker and ejection states, the rollout step and B's vs A's
// error and slow rates (veer_gateway_release_*), and the SLOs' burn rates.
var GatewayPanels = []Panel{
	{Title: "Requests by route", Unit: "reqps", Stacked: true, Queries: []Query{{`sum by (route) (rate(veer_gateway_requests_total[1m]))`, "{{route}}"}}},
	{Title: "Failures by outcome kind", Unit: "reqps", Stacked: true, Queries: []Query{{`sum by (kind) (rate(veer_gateway_requests_total{kind!~"success|client_error"}[1m]))`, "{{kind}}"}}},
	{Title: "p99 latency by route", Unit: "s", Queries: []Query{{`histogram_quantile(0.99, sum by (le, route) (rate(veer_gateway_request_duration_seconds_bucket[5m])))`, "{{route}}"}}},
	{Title: "Shed by tier", Unit: "reqps", Stacked: true, Queries: []Query{{`sum by (tier) (rate(veer_shed_shed_total[1m]))`, "{{tier}}"}}},
	{Title: "Limited by dimension", Unit: "reqps", Stacked: true, Queries: []Query{{`sum by (dimension) (rate(veer_limit_rejected_total[1m]))`, "{{dimension}}"}}},
	{Title: "Limited by tier", Unit: "reqps", Stacked: true, Queries: []Query{{`sum by (tier) (rate(veer_limit_rejected_total[1m]))`, "{{tier}}"}}},
	{Title: "Guard refusals", Unit: "reqps", Stacked: true, Queries: []Query{{`sum by (guard) (rate(veer_gateway_guard_rejected_total[1m]))`, "{{guard}}"}}},
	{Title: "Breaker state by cluster (0 closed, 1 open, 2 half-open)", Unit: "short", Queries: []Query{{`max by (cluster) (veer_gateway_breaker_state)`, "{{cluster}}"}}},
	{Title: "Usable backends and ejections by cluster", Unit: "short", Queries: []Query{
		{`sum by (cluster) (veer_gateway_backend_usable_state)`, "usable {{cluster}}"},
		{`sum by (cluster) (increase(veer_gateway_ejections_total[5m]))`, "ejected (5m) {{cluster}}"},
	}},
	{Title: "Async queue depth by group (when async routes exist)", Unit: "short", Stacked: true, Queries: []Query{{`sum by (group) (veer_async_depth_invocations)`, "{{group}}"}}},
	{Title: "Async: age of the oldest waiting invocation by group", Unit: "s", Queries: []Query{{`max by (group) (veer_async_oldest_age_seconds)`, "{{group}}"}}},
	{Title: "Async: invocations failed for good (dead letters) by group", Unit: "reqps", Queries: []Query{{`sum by (group) (rate(veer_async_finished_total{state="failed"}[5m]))`, "{{group}}"}}},
	{Title: "Retries by route", Unit: "reqps", Queries: []Query{{`sum by (route) (rate(veer_gateway_retries_total[1m]))`, "{{route}}"}}},
	{Title: "Rollout step by route (-1: every tenant on A: draining B or aborted)", Unit: "short", Queries: []Query{
		{`max by (route) (veer_gateway_release_step_state)`, "step {{route}}"},
		{`max by (route, status) (veer_gateway_release_status_state) > 0`, "{{route}} {{status}}"},
	}},
	{Title: "Rollout error and slow rates, B vs A", Unit: "percentunit", Queries: []Query{
		{`sum by (route, version) (rate(veer_gateway_release_errors_total[1m])) / sum by (route, version) (rate(veer_gateway_release_requests_total[1m]))`, "errors {{route}} {{version}}"},
		{`sum by (route, version) (rate(veer_gateway_release_slow_total[1m])) / sum by (route, version) (rate(veer_gateway_release_requests_total[1m]))`, "slow {{route}} {{version}}"},
	}},
	{Title: "SLO burn rate, 1h (1 = on budget; the page fires above 14.4)", Unit: "short", Queries: []Query{{`veer:slo_error_ratio:rate1h / on (route, sli) group_left veer:slo_error_budget:ratio`, "{{route}} {{sli}}"}}},
}

// Dashboard returns a Grafana dashboard (JSON model, schema 39) of the
// panels, two a row, reading a Prometheus data source chosen in the
// dashboard's variable.
func Dashboard(title string, panels []Panel) ([]byte, error) {
	type target struct {
		Expr         string            `json:"expr"`
		LegendFormat string            `json:"legendFormat"`
		RefID        string            `json:"refId"`
		Datasource   map[string]string `json:"datasource"`
	}
	type panel struct {
		ID          int               `json:"id"`
		Type        string            `json:"type"`
		Title       string            `json:"title"`
		Datasource  map[string]string `json:"datasource"`
		GridPos     map[string]int    `json:"gridPos"`
		Targets     []target          `json:"targets"`
		FieldConfig map[string]any    `json:"fieldConfig"`
	}
	ds := map[string]string{"type": "prometheus", "uid": "${datasource}"}
	var ps []panel
	for i, p := range panels {
		var ts []target
		for j, q := range p.Queries {
			ts = append(ts, target{Expr: q.Expr, LegendFormat: q.Legend, RefID: string(rune('A' + j)), Datasource: ds})
		}
		stacking := "none"
		if p.Stacked {
			stacking = "normal"
		}
		ps = append(ps, panel{
			ID: i + 1, Type: "timeseries", Title: p.Title, Datasource: ds,
			GridPos: map[string]int{"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i / 2)},
			Targets: ts,
			FieldConfig: map[string]any{"defaults": map[string]any{
				"unit":   p.Unit,
				"custom": map[string]any{"stacking": map[string]string{"mode": stacking}, "fillOpacity": 20},
			}},
		})
	}
	return json.MarshalIndent(map[string]any{
		"title": title, "uid": "veer-gateway", "schemaVersion": 39, "editable": true,
		"time":    map[string]string{"from": "now-1h", "to": "now"},
		"refresh": "10s",
		"templating": map[string]any{"list": []any{map[string]any{
			"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus",
		}}},
		"panels": ps,
	}, "", "  ")
}
