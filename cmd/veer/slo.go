package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/slo"
)

// newSLORulesCmd is `veer gateway slo-rules`.
func newSLORulesCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "slo-rules",
		Short: "Print Prometheus recording and alerting rules for the routes' SLOs",
		Long: `slo-rules reads a gateway config and prints a Prometheus rules file for every
route with an slo section: the availability SLI (answers other than 5xx, 429
and network failures) and the latency SLI (answered within slo.latency) as
recording rules over 5m ... 3d, and the Google SRE workbook's multi-window,
multi-burn-rate alerts VeerSLOBurnPage (1h/5m at 14.4x, 6h/30m at 6x) and
VeerSLOBurnTicket (1d/2h at 3x, 3d/6h at 1x). Check it with
'promtool check rules'. docs/release.md has the error-budget table.`,
		Example: `  veer gateway slo-rules --config gateway.yaml > veer-slo.rules.yaml
  promtool check rules veer-slo.rules.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return fmt.Errorf("--config FILE is required")
			}
			var cfg gateway.Config
			if err := config.Load(path, &cfg); err != nil {
				return err
			}
			var routes []slo.Route
			for _, r := range cfg.Routes {
				if r.SLO != nil {
					routes = append(routes, slo.Route{Name: r.Name, Objective: *r.SLO})
				}
			}
			if len(routes) == 0 {
				return fmt.Errorf("%s: no route has an slo section (e.g. slo: {availability: 99.9, latency: 250ms})", path)
			}
			_, err := fmt.Fprint(cmd.OutOrStdout(), slo.Rules(slo.GatewayMetrics, routes))
			return err
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "gateway config file (YAML)")
	return cmd
}

// newDashboardCmd is `veer gateway dashboard`.
func newDashboardCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "dashboard",
		Short: "Print a Grafana dashboard (JSON) of the gateway's key paths",
		Long: `dashboard prints a Grafana dashboard model for veer gateway's metrics: requests
by route, failures by outcome kind, p99 latency, shed by tier, limited by
dimension, guard refusals, breaker and ejection states, retries, and the SLO
burn rate of 'veer gateway slo-rules'. Import it in Grafana and pick the
Prometheus data source.`,
		Example: `  veer gateway dashboard > veer-gateway.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := slo.Dashboard("veer gateway", slo.GatewayPanels)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
			return err
		},
	}
}
