package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/veerhq/veer/sim"
)

func runVeer(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestSimJSON(t *testing.T) {
	out, err := runVeer(t, "sim", "--scenario", "all", "--sessions", "20", "--format", "json", "-q")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<24)
	n := 0
	for sc.Scan() {
		n++
		var res struct {
			Scenario   string `json:"scenario"`
			Sessions   int    `json:"sessions"`
			Seed       uint64 `json:"seed"`
			Strategies map[string]map[string]json.RawMessage
		}
		if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if res.Sessions != 20 || res.Seed != 1 || len(res.Strategies) != len(sim.Strategies()) || res.Strategies["uber-confirm"] == nil {
			t.Errorf("%s: sessions %d seed %d strategies %d", res.Scenario, res.Sessions, res.Seed, len(res.Strategies))
		}
		for name, s := range res.Strategies {
			for _, f := range []string{"primary_share", "error_rate", "failovers_per_session", "latency_ms",
				"quic_share", "canaries_per_session", "detect_seconds", "recover_seconds", "by_condition", "by_carrier"} {
				if _, ok := s[f]; !ok {
					t.Errorf("%s/%s: no field %s", res.Scenario, name, f)
				}
			}
		}
	}
	if n < 6 {
		t.Errorf("%d scenarios in --scenario all", n)
	}
}

func TestSimTableAndPlots(t *testing.T) {
	dir := t.TempDir()
	out, err := runVeer(t, "sim", "--sessions", "30", "--strategy", "uber,roundrobin", "--plots", dir, "-q", "--seed", "9")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"scenario default: 30 sessions, seed 9", "uber", "roundrobin", "p99 ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "threshold") {
		t.Errorf("threshold not asked for:\n%s", out)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "default-*.png")); len(files) == 0 {
		t.Error("no charts written")
	}
}

func TestSimErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: b\nhorizon: -1m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--scenario", "nope"}, "unknown scenario"},
		{[]string{"sim", "--strategy", "magic"}, "unknown strategy"},
		{[]string{"sim", "--format", "xml"}, "unknown format"},
		{[]string{"sim", "--sessions", "-3"}, "sessions must be"},
		{[]string{"sim", "--scenario", bad}, "bad.yaml:2: horizon"},
	} {
		_, err := runVeer(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestSimListAndShow(t *testing.T) {
	out, err := runVeer(t, "sim", "--list")
	if err != nil || !strings.Contains(out, "fig4") || !strings.HasPrefix(out, "default") {
		t.Fatalf("--list: %v\n%s", err, out)
	}
	out, err = runVeer(t, "sim", "--show", "fig4")
	if err != nil || !strings.Contains(out, "dns_failure") {
		t.Fatalf("--show: %v\n%s", err, out)
	}
	// Each trace's length, gaps and outage share follow the YAML.
	out, err = runVeer(t, "sim", "--show", "default")
	want := "# traces[0] lte-drive: 300.0 s, 5199 opportunities (17.3/s), 5 gaps of 1 s or more (longest 18.1 s), 10.27% of the time in gaps, 0.00% in outages\n"
	if err != nil || !strings.Contains(out, want) {
		t.Fatalf("--show default: %v\n%s\nwant a line %q", err, out, want)
	}
}
