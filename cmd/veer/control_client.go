package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/veerhq/veer/control"
)

func controlClientCmds(cl *adminClient) []*cobra.Command {
	var (
		ifMatch, reason, sample string
		dryRun, create          bool
		limit                   int
	)
	put := &cobra.Command{
		Use:   "put KEY FILE",
		Short: "Write a document (validated; --dry-run shows who would move)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := os.ReadFile(args[1])
			if err != nil {
				return err
			}
			q := url.Values{}
			if dryRun {
				q.Set("dry_run", "true")
				if sample != "" {
					q.Set("sample", sample)
				}
			}
			path := "/v1/admin/docs/" + args[0]
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			hdr := map[string]string{"If-Match": ifMatch, "X-Veer-Reason": reason}
			if create {
				hdr["If-None-Match"] = "*"
			}
			return cl.do(cmd, http.MethodPut, path, body, hdr)
		},
	}
	put.Flags().StringVar(&ifMatch, "if-match", "", "the version you read (409 if it changed); * = only if it exists (412 if not)")
	put.Flags().BoolVar(&create, "create", false, "only if the document does not exist yet (If-None-Match: *; 412 if it does)")
	put.Flags().StringVar(&reason, "reason", "", "why (recorded in the audit log)")
	put.Flags().BoolVar(&dryRun, "dry-run", false, "do not write; report who would move")
	put.Flags().StringVar(&sample, "sample", "", "dry-run sample: N synthetic devices, or recent")

	simple := func(use, short string, args int, f func(args []string) (string, string)) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(args),
			RunE: func(cmd *cobra.Command, a []string) error {
				m, p := f(a)
				return cl.do(cmd, m, p, nil, map[string]string{"If-Match": ifMatch})
			}}
	}
	get := simple("get KEY", "Print a document (its version on stderr)", 1, func(a []string) (string, string) { return "GET", "/v1/admin/docs/" + a[0] })
	docs := simple("docs", "List documents", 0, func([]string) (string, string) { return "GET", "/v1/admin/docs" })
	whoami := simple("whoami", "Show the token's name and role", 0, func([]string) (string, string) { return "GET", "/v1/admin/whoami" })
	del := simple("delete KEY", "Delete a document", 1, func(a []string) (string, string) { return "DELETE", "/v1/admin/docs/" + a[0] })
	del.Flags().StringVar(&ifMatch, "if-match", "", "the version you read")
	history := simple("history KEY", "A document's changes, newest first", 1, func(a []string) (string, string) {
		return "GET", "/v1/admin/history/" + a[0] + "?limit=" + strconv.Itoa(limit)
	})
	audit := simple("audit", "Every change, newest first", 0, func([]string) (string, string) {
		return "GET", "/v1/admin/audit?limit=" + strconv.Itoa(limit)
	})
	for _, c := range []*cobra.Command{history, audit} {
		c.Flags().IntVar(&limit, "limit", 20, "entries")
	}
	rollback := &cobra.Command{
		Use:   "rollback KEY VERSION",
		Short: "Write an earlier version of a document as its new version",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil {
				return fmt.Errorf("VERSION %q: %w", args[1], err)
			}
			body, _ := json.Marshal(map[string]any{"version": v, "reason": reason})
			return cl.do(cmd, http.MethodPost, "/v1/admin/rollback/"+args[0], body, map[string]string{"If-Match": ifMatch})
		},
	}
	rollback.Flags().StringVar(&reason, "reason", "", "why")
	rollback.Flags().StringVar(&ifMatch, "if-match", "", "the version you read")
	var pb control.Playbook
	var ovSite, ovPrimary string
	playbook := &cobra.Command{
		Use:   "playbook ACTION",
		Short: "site_down, site_up, cluster_down, cluster_up, emergency_set, emergency_clear",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pb.Action = args[0]
			if ovSite != "" || ovPrimary != "" {
				pb.Override = &control.Override{Site: ovSite, Primary: ovPrimary}
			}
			body, _ := json.Marshal(pb)
			return cl.do(cmd, http.MethodPost, "/v1/admin/playbook", body, nil)
		},
	}
	f := playbook.Flags()
	f.StringVar(&pb.Site, "site", "", "site (site_*, cluster_*)")
	f.StringVar(&pb.Cluster, "cluster", "", "cluster (cluster_*)")
	f.StringVar(&pb.Region, "region", "", "region (emergency_*; empty: global)")
	f.StringVar(&ovSite, "to-site", "", "emergency_set: send users to this site")
	f.StringVar(&ovPrimary, "to-domain", "", "emergency_set: answer this domain")
	f.StringVar(&pb.Reason, "reason", "", "why")
	return []*cobra.Command{get, put, docs, whoami, del, history, audit, rollback, playbook}
}
