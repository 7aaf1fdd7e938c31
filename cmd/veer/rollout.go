package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/release"
)

// rolloutCmd is `veer control rollout start|pause|resume|abort|status`, a
// client of POST and GET /v1/admin/rollouts/{route}.
func rolloutCmd(cl *adminClient) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Gray release of a gateway route: start, pause, resume, abort, status",
		Long: `A rollout moves a gateway route's tenants from cluster "from" (A) to "to"
(B): B drained first until every gateway reports it idle (unless no_drain),
then canary tenants, then rings of the other tenants, judged each step on
the gateways' counts; a bad B is aborted (every tenant back on A). A plan
naming a route or cluster an announced gateway lacks is refused.

  veer control rollout start api --plan plan.yaml --reason "v2.3"
  veer control rollout status api
  veer control rollout abort api --reason "customer report"`,
	}
	action := func(name string) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			body, _ := json.Marshal(control.RolloutRequest{Action: name, Reason: reason})
			return cl.do(cmd, http.MethodPost, "/v1/admin/rollouts/"+args[0], body, nil)
		}
	}
	var planFile string
	start := &cobra.Command{
		Use:   "start ROUTE --plan FILE",
		Short: "Start a rollout of ROUTE with the plan in FILE (YAML or JSON; its route defaults to ROUTE)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if planFile == "" {
				return fmt.Errorf("--plan: required")
			}
			raw, err := os.ReadFile(planFile)
			if err != nil {
				return err
			}
			plan := release.Plan{Route: args[0]}
			if err := config.Parse(raw, planFile, &plan); err != nil {
				return err
			}
			var doc any // the file as written ("5m" stays a string), as JSON
			if err := yaml.Unmarshal(raw, &doc); err != nil {
				return fmt.Errorf("%s: %w", planFile, err)
			}
			if m, ok := doc.(map[string]any); ok && m["route"] == nil {
				m["route"] = args[0]
			}
			p, err := json.Marshal(doc)
			if err != nil {
				return fmt.Errorf("%s: %w", planFile, err)
			}
			body, _ := json.Marshal(control.RolloutRequest{Action: "start", Plan: p, Reason: reason})
			return cl.do(cmd, http.MethodPost, "/v1/admin/rollouts/"+args[0], body, nil)
		},
	}
	start.Flags().StringVar(&planFile, "plan", "", "the release plan (release.Plan: from, to, canary_tenants, rings, hold, slo)")
	cmd.AddCommand(start)
	for _, a := range []struct{ name, short string }{
		{"pause", "Hold the current step (the analysis waits)"},
		{"resume", "Resume a paused rollout (the step's clock restarts)"},
		{"abort", "Send every tenant back to the old version"},
	} {
		cmd.AddCommand(&cobra.Command{Use: a.name + " ROUTE", Short: a.short, Args: cobra.ExactArgs(1), RunE: action(a.name)})
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "status ROUTE",
		Short: "The rollout, the gateways' pooled counts of its step and the verdict now",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cl.do(cmd, http.MethodGet, "/v1/admin/rollouts/"+args[0], nil, nil)
		},
	})
	cmd.PersistentFlags().StringVar(&reason, "reason", "", "why (recorded in the audit log)")
	return cmd
}
