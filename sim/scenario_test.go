package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/failover"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestBundledScenarios(t *testing.T) {
	names := Bundled()
	if len(names) < 6 || names[0] != "default" {
		t.Fatalf("bundled = %v", names)
	}
	for _, want := range []string{"fig1", "fig2", "fig3", "fig4", "regional"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("no bundled scenario %q", want)
		}
	}
	for _, name := range names {
		sc, err := LoadBundled(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if sc.Name != name || sc.Description == "" {
			t.Errorf("%s: name %q, description %q", name, sc.Name, sc.Description)
		}
		if _, err := compile(sc, ""); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := LoadBundled("nope"); !errors.Is(err, ErrUnknownScenario) {
		t.Errorf("unknown scenario: %v", err)
	}
}

func TestParseScenarioErrors(t *testing.T) {
	for _, tc := range []struct {
		src   string
		field string
		line  int
	}{
		{"name: x\nsessions: 0\n", "sessions", 2},
		{"name: x\nnetworks:\n  - name: a\n    share: 1\n    rtt: 0s\n    good_mean: 1s\n    bad_mean: 1s\n", "networks[0].rtt", 5},
		{"name: x\noutages:\n  - kind: meteor\n    start: 1m\n    end: 2m\n", "outages[0].kind", 3},
		{"name: x\noutages:\n  - kind: dns_failure\n    start: 1m\n    end: 2m\n    carriers: [C9]\n", "outages[0].carriers[0]", 6},
		{"name: x\nfailover:\n  failure_window: -1s\n", "failover.failure_window", 3},
		{"name: x\ndomains:\n  primary: {name: edge}\n  backups: [{name: edge}]\n", "domains.backups[0].name", 4},
		{"name: x\ntraffic:\n  - name: a\n    share: 1\n    phases: []\n", "traffic[0].phases", 5},
	} {
		_, err := ParseScenario([]byte(tc.src), "s.yaml")
		var fe *config.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%q: error %v, want a FieldError", tc.src, err)
			continue
		}
		if fe.Field != tc.field || fe.Line != tc.line || fe.File != "s.yaml" {
			t.Errorf("%q: got field %q line %d file %q (%v), want %q line %d", tc.src, fe.Field, fe.Line, fe.File, err, tc.field, tc.line)
		}
	}
	// Unknown fields are rejected.
	_, err := ParseScenario([]byte("name: x\nsesions: 3\n"), "s.yaml")
	var pe *config.ParseError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "sesions") {
		t.Errorf("unknown field: %v", err)
	}
}

func TestScenarioFileWithTrace(t *testing.T) {
	dir := t.TempDir()
	trace := "0\n100\n3000\n3100\n6000\n"
	if err := os.WriteFile(filepath.Join(dir, "my.trace"), []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "name: mine\nsessions: 50\ntraces:\n  - file: my.trace\n    share: 1\n"
	file := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, path, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), sc, []Strategy{Uber}, Options{File: path})
	if err != nil {
		t.Fatal(err)
	}
	// The trace is in gaps of 2.9 s about 95% of the time. By default a
	// gap delays packets (retransmissions 1, 3, 7 s after sending): few
	// requests reach their 10 s timeout.
	if res.DeviceErrorRate > 0.2 {
		t.Errorf("device error rate %v: gaps of 2.9 s should mostly delay requests", res.DeviceErrorRate)
	}
	// The first version's model, every gap an outage: most requests fail.
	sc.TraceGaps.OutageAbove = time.Second
	res, err = Run(context.Background(), sc, []Strategy{Uber}, Options{File: path})
	if err != nil {
		t.Fatal(err)
	}
	if res.DeviceErrorRate < 0.5 {
		t.Errorf("device error rate %v with gaps as outages, want most requests failed", res.DeviceErrorRate)
	}
	sc.Traces[0].File = "missing.trace"
	if _, err := Run(context.Background(), sc, []Strategy{Uber}, Options{File: path}); !errors.Is(err, os.ErrNotExist) || !errors.Is(err, ErrUnknownTrace) {
		t.Errorf("missing trace: %v", err)
	}
}

func TestGoldenJSON(t *testing.T) {
	src, err := os.ReadFile("testdata/small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ParseScenario(src, "testdata/small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := runJSON(t, sc, Strategies(), Options{File: "testdata/small.yaml"})
	golden := "testdata/small.golden.json"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./sim -run Golden -update)", err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		lo := max(i-120, 0)
		t.Errorf("JSON differs from %s at byte %d (if intended, run go test ./sim -run Golden -update):\n got ...%s\nwant ...%s",
			golden, i, got[lo:min(i+80, len(got))], want[lo:min(i+80, len(want))])
	}
}

func FuzzParseScenario(f *testing.F) {
	for _, name := range Bundled() {
		src, err := BundledSource(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Add([]byte("name: x\nsessions: 3\nhorizon: 1m\n"))
	f.Add([]byte("{\"name\": \"j\", \"outages\": [{\"kind\": \"tls_failure\", \"start\": \"1s\", \"end\": \"2s\", \"flap\": {\"down\": \"1s\", \"up\": \"1s\"}}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseScenario(data, "fuzz.yaml")
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		// A scenario that validates compiles (bundled traces only: no
		// file access from fuzzing) and simulates a few sessions.
		for _, tr := range sc.Traces {
			if strings.ContainsAny(tr.File, "/.") {
				return
			}
		}
		m, err := compile(sc, "")
		if err != nil {
			return // an unknown bundled trace name
		}
		if sc.Session.DurationMax > 2*60*60*1e9 || len(m.outages) > 20 {
			return
		}
		for _, c := range sc.Traffic {
			for _, p := range c.Phases {
				if p.RatePerMinute > 120 {
					return
				}
			}
		}
		var r realisation
		x := &runner{m: m}
		for i := range 3 {
			m.generate(&r, 1, i)
			pol, err := Uber.New(sc.PolicyConfig())
			if err != nil {
				t.Fatalf("validated scenario, policy error: %v", err)
			}
			_ = pol
			x.run(&r, func() failover.Policy { p, _ := Uber.New(sc.PolicyConfig()); return p }, func(int64) {})
		}
		_ = fmt.Sprint(sc.Name)
	})
}

// TestFirstTraceModelUnchanged: small.yaml under the first version's gap
// model (trace_gaps.outage_above: 1s) gives, for the four strategies that
// existed then, exactly the figures of the first version's golden
// (testdata/small-v1.golden.json, kept as it was): the refactors of issues
// 14 and 17 (one failover.Config, independent trace shares, SetNetwork)
// change no figure; only the gap model and the veer strategy do.
func TestFirstTraceModelUnchanged(t *testing.T) {
	src, err := os.ReadFile("testdata/small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src = append(src, "trace_gaps: {outage_above: 1s}\n"...)
	sc, err := ParseScenario(src, "testdata/small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := runJSON(t, sc, []Strategy{Uber, UberConfirm, RoundRobin, Threshold}, Options{File: "testdata/small.yaml"})
	want, err := os.ReadFile("testdata/small-v1.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g, w map[string]json.RawMessage
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"strategies", "device_error_rate", "sessions", "seed"} {
		if !bytes.Equal(g[k], w[k]) {
			t.Errorf("%s differs from the first version's golden", k)
		}
	}
}
