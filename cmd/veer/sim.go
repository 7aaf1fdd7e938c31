package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/veerhq/veer/sim"
	"github.com/veerhq/veer/sim/plot"
)

func init() { subcommands = append(subcommands, newSimCmd) }

func newSimCmd() *cobra.Command {
	var (
		scenarios  []string
		strategies string
		sessions   int
		seed       uint64
		format     string
		plots      string
		workers    int
		list       bool
		show       string
		quiet      bool
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Reproduce Uber's failover evaluation in virtual time",
		Long: `sim drives the failover policies (the very code of the failover Transport)
through modelled mobile networks and domain outages in virtual time, and
compares them: traffic share on the primary, error rate, failovers per
session by network condition, tail latency, QUIC share, canaries, and outage
detection and recovery times. Same seed, same output, byte for byte.

A scenario is a bundled name (see --list) or a YAML file (docs/sim.md
documents the schema; --show NAME prints a bundled one to start from).
"--scenario all" runs every bundled scenario.`,
		Example: `  veer sim
  veer sim --scenario fig4 --format markdown
  veer sim --scenario all --format json --plots out/
  veer sim --scenario my.yaml --strategy uber,roundrobin --sessions 20000 --seed 7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if list {
				for _, name := range sim.Bundled() {
					s, err := sim.LoadBundled(name)
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "%-10s %s\n", name, s.Description)
				}
				return nil
			}
			if show != "" {
				return showScenario(out, show)
			}
			f, err := sim.ParseFormat(format)
			if err != nil {
				return err
			}
			strats, err := sim.ParseStrategies(strategies)
			if err != nil {
				return err
			}
			var refs []string
			for _, s := range scenarios {
				for _, r := range strings.Split(s, ",") {
					if r = strings.TrimSpace(r); r == "all" {
						refs = append(refs, sim.Bundled()...)
					} else if r != "" {
						refs = append(refs, r)
					}
				}
			}
			if len(refs) == 0 {
				refs = []string{"default"}
			}
			opt := sim.Options{Sessions: sessions, Workers: workers}
			if cmd.Flags().Changed("seed") {
				opt.Seed = &seed
			}
			if !quiet {
				opt.Progress = cmd.ErrOrStderr()
			}
			for i, ref := range refs {
				sc, file, err := sim.Load(ref)
				if err != nil {
					return err
				}
				opt.File = file
				res, err := sim.Run(cmd.Context(), sc, strats, opt)
				if err != nil {
					return err
				}
				if i > 0 && f != sim.FormatJSON {
					fmt.Fprintln(out)
				}
				if err := sim.Write(out, f, res); err != nil {
					return err
				}
				if plots != "" {
					files, err := plot.Write(plots, res)
					if err != nil {
						return err
					}
					if !quiet {
						fmt.Fprintf(cmd.ErrOrStderr(), "sim %s: wrote %d charts to %s\n", res.Scenario, len(files), plots)
					}
				}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&scenarios, "scenario", nil, `bundled scenario name, YAML file, or "all" (repeatable; default "default")`)
	fl.StringVar(&strategies, "strategy", sim.StrategyNames(), "comma-separated strategies to compare")
	fl.IntVar(&sessions, "sessions", 0, "number of sessions (default: the scenario's)")
	fl.Uint64Var(&seed, "seed", 0, "random seed (default: the scenario's)")
	fl.StringVar(&format, "format", "table", "output format: table, markdown or json")
	fl.StringVar(&plots, "plots", "", "write PNG and SVG charts into this directory")
	fl.IntVar(&workers, "workers", 0, "simulation goroutines (default GOMAXPROCS; the output does not depend on it)")
	fl.BoolVar(&list, "list", false, "list the bundled scenarios")
	fl.StringVar(&show, "show", "", "print the YAML of a bundled scenario (or a file), with its traces' length, gaps and outage share")
	fl.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	return cmd
}

// showScenario prints a scenario's YAML (bundled name or file) followed by
// a comment line per trace: its length, gaps and outage share.
func showScenario(out io.Writer, ref string) error {
	sc, file, err := sim.Load(ref)
	if err != nil {
		return err
	}
	var data []byte
	if file == "" {
		data, err = sim.BundledSource(ref)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return err
	}
	if _, err := out.Write(data); err != nil {
		return err
	}
	stats, err := sc.TraceStats()
	if err != nil {
		return err
	}
	for i, st := range stats {
		fmt.Fprintf(out, "# traces[%d] %s: %.1f s, %d opportunities (%.1f/s), %d gaps of 1 s or more (longest %.1f s), %.2f%% of the time in gaps, %.2f%% in outages\n",
			i, st.File, st.LengthSeconds, st.Opportunities, st.RatePerSecond, st.Gaps, st.LongestGapSeconds, 100*st.GapShare, 100*st.OutageShare)
	}
	return nil
}
