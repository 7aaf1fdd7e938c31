package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestControlServeAndCLI runs `veer control --config` and drives it with the
// CLI subcommands over its admin API.
func TestControlServeAndCLI(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "control.yaml")
	os.WriteFile(cfg, []byte("data_dir: "+dir+"/data\nlisten: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		root := newRoot()
		root.SetOut(pw)
		root.SetErr(pw)
		root.SetArgs([]string{"control", "--config", cfg})
		done <- root.ExecuteContext(ctx)
		pw.Close()
	}()
	var admin, tokenFile string
	sc := bufio.NewScanner(pr)
	re := regexp.MustCompile(`admin API (http://\S+); admin token in (\S+) \(created now\)`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			admin, tokenFile = m[1], m[2]
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if admin == "" {
		t.Fatalf("no admin address printed (%v)", <-done)
	}
	fi, err := os.Stat(tokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file %s: %v %v", tokenFile, err, fi)
	}
	table := filepath.Join(dir, "table.yaml")
	os.WriteFile(table, []byte(`default_domain: wap.example.com
regions: [{name: local, cidrs: [127.0.0.0/8], site: a}]
sites:
  - {name: a, sibling: b, clusters: [{name: a1, domain: a1.example.com}]}
  - {name: b, sibling: a, clusters: [{name: b1, domain: b1.example.com}]}
`), 0o600)
	zones, badZones := filepath.Join(dir, "zones.yaml"), filepath.Join(dir, "bad-zones.yaml")
	os.WriteFile(zones, []byte("zones: [{origin: a.test., access: [{name: edge}]}]\n"), 0o600)
	os.WriteFile(badZones, []byte("zones:\n  - origin: a.test.\n    records: ['www A 300.1.1.1']\n"), 0o600)
	plan, badPlan := filepath.Join(dir, "plan.yaml"), filepath.Join(dir, "bad-plan.yaml")
	os.WriteFile(plan, []byte("from: v1\nto: v2\ncanary_tenants: [acme]\nhold: 2m\n"), 0o600)
	os.WriteFile(badPlan, []byte("from: v1\nto: v2\nrings: [10, 5, 100]\n"), 0o600)
	cli := func(args ...string) (string, error) {
		return run(t, append(append([]string{"control"}, args...), "--server", admin, "--token-file", tokenFile)...)
	}
	steps := []struct {
		args []string
		want string
		fail bool
	}{
		{[]string{"whoami"}, `"role": "admin"`, false},
		{[]string{"put", "routing/table", table, "--if-match", "*"}, "412", true},
		{[]string{"put", "routing/table", table, "--create", "--reason", "first"}, `"version": 1`, false},
		{[]string{"put", "routing/table", table, "--create"}, "412", true},
		{[]string{"put", "routing/table", table, "--if-match", "5"}, "409", true},
		{[]string{"put", "routing/table", table, "--dry-run", "--sample", "1000"}, `"moved": 0`, false},
		{[]string{"playbook", "site_down", "--site", "a", "--reason", "fire"}, `"key": "routing/state"`, false},
		{[]string{"playbook", "emergency_set", "--to-domain", "sorry.example.com"}, `"key": "routing/emergency"`, false},
		{[]string{"get", "routing/state"}, `"sites_down":["a"]`, false},
		{[]string{"history", "routing/state"}, `"reason": "site_down: fire"`, false},
		{[]string{"rollback", "routing/table", "1", "--reason", "undo"}, `"version": 2`, false},
		{[]string{"audit", "--limit", "1"}, `rollback to version 1: undo`, false},
		{[]string{"playbook", "nuke"}, "400", true},
		// the private DNS's zones (dnsserver/dnsstore), validated by its own rules
		{[]string{"put", "dns/zones", zones}, `"version": 1`, false},
		{[]string{"put", "dns/zones", badZones}, "dns/zones:3: zones[0].records[0]", true},
		// gray release of a gateway route
		{[]string{"rollout", "start", "api", "--plan", badPlan}, "rings[1]", true},
		{[]string{"rollout", "start", "api", "--plan", plan, "--reason", "v2"}, `"status": "running"`, false},
		{[]string{"rollout", "start", "api", "--plan", plan}, "409", true},
		{[]string{"rollout", "status", "api"}, `"gateways": 0`, false},
		{[]string{"rollout", "pause", "api", "--reason", "look"}, `"status": "paused"`, false},
		{[]string{"rollout", "resume", "api"}, `"status": "running"`, false},
		{[]string{"rollout", "abort", "api", "--reason", "report"}, `"reason": "abort by operator: report"`, false},
		{[]string{"rollout", "abort", "api"}, "409", true},
		{[]string{"history", "release/api"}, `"reason": "rollout start: v2"`, false},
	}
	for _, st := range steps {
		out, err := cli(st.args...)
		if (err != nil) != st.fail || !strings.Contains(out+errString(err), st.want) {
			t.Fatalf("veer control %v: %v\n%s\nwant %q", st.args, err, out, st.want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
