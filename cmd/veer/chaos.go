package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/up"
)

func init() { subcommands = append(subcommands, newChaosCmd) }

func newChaosCmd() *cobra.Command {
	var (
		dataDir string
		cc      up.ChaosConfig
		devices int
		cfgFile string
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Break a running veer up on purpose and check each seed's promise",
		Long: `chaos plays failures against a running "veer up" (found through the state
file in --data DIR, or the one started without --data), or starts its own
when none runs. Each scenario injects a real fault (SIGKILL or SIGSTOP of a
child process), watches the population, and prints PASS or FAIL with the
measured figure beside the seed's promise. The exit status is 1 when any
scenario fails. docs/chaos.md lists the scenarios.`,
		Example: `  veer chaos list
  veer chaos run primary-blackhole
  veer chaos run all --data ./veer-up-data`,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, s := range up.Scenarios() {
				fmt.Fprintf(cmd.OutOrStdout(), "%-18s seed %s  fault: %s\n%-18s          promise: %s\n", s.Name, s.Seed, s.Fault, "", s.Promise)
			}
			return nil
		},
	}
	run := &cobra.Command{
		Use:   "run NAME...|all",
		Short: "Run scenarios (all: every one, in order)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var scs []up.Scenario
			for _, a := range args {
				if a == "all" {
					scs = append(scs, up.Scenarios()...)
					continue
				}
				s, ok := up.Lookup(a)
				if !ok {
					return fmt.Errorf("chaos: no scenario %q (veer chaos list)", a)
				}
				scs = append(scs, s)
			}
			var cfg up.Config
			if cfgFile != "" {
				if err := config.Load(cfgFile, &cfg); err != nil {
					return err
				}
			}
			if devices > 0 {
				cfg.Devices = devices
			}
			return runChaos(cmd.Context(), cmd.OutOrStdout(), dataDir, cfg, cc, scs)
		},
	}
	f := run.Flags()
	f.StringVar(&dataDir, "data", "", "data directory of the veer up to break (default: the one running without --data)")
	f.IntVar(&devices, "devices", 0, "population of the veer up started when none runs")
	f.StringVar(&cfgFile, "config", "", "config file of the veer up started when none runs (docs/up.md)")
	f.DurationVar(&cc.Window, "window", 0, "measuring window (default 10s)")
	f.DurationVar(&cc.Detect, "detect", 0, "longest wait for the clients to react (default 30s)")
	f.DurationVar(&cc.Recover, "recover", 0, "longest wait for the return after the fault (default 60s)")
	cmd.AddCommand(list, run)
	return cmd
}

// errScenarioFailed makes the exit status 1 after every verdict printed.
var errScenarioFailed = errors.New("chaos: a scenario failed")

func runChaos(ctx context.Context, out io.Writer, dataDir string, cfg up.Config, cc up.ChaosConfig, scs []up.Scenario) error {
	dir := dataDir
	if dir == "" {
		if b, err := os.ReadFile(upPointer()); err == nil {
			dir = strings.TrimSpace(string(b))
		}
	}
	var api string
	if dir != "" {
		st, err := up.ReadState(dir)
		if err != nil && !errors.Is(err, up.ErrNotRunning) {
			return err
		}
		if err == nil {
			api = st.API
			fmt.Fprintf(out, "chaos: against veer up pid %d (data %s)\n", st.PID, dir)
		} else if dataDir != "" {
			return err
		}
	}
	if api == "" {
		log, err := obs.NewLogger(os.Stderr, "text", "warn")
		if err != nil {
			return err
		}
		sys, err := up.New(cfg, up.Options{Logger: log, ChildEnv: childEnv()})
		if err != nil {
			return err
		}
		start := time.Now()
		if err := sys.Start(ctx); err != nil {
			return err
		}
		defer sys.Close()
		api = sys.State().API
		fmt.Fprintf(out, "chaos: no veer up running; started one (data %s) in %.1fs\n", sys.DataDir(), time.Since(start).Seconds())
	}
	c := up.NewChaos(api, cc, out)
	failed, skipped := 0, 0
	for _, sc := range scs {
		r := c.Run(ctx, sc)
		fmt.Fprint(out, r.String())
		switch {
		case r.Skipped != "":
			skipped++
		case !r.Pass:
			failed++
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	fmt.Fprintf(out, "chaos: %d of %d passed", len(scs)-failed-skipped, len(scs))
	if skipped > 0 {
		fmt.Fprintf(out, ", %d skipped", skipped)
	}
	fmt.Fprintln(out)
	if failed > 0 {
		return errScenarioFailed
	}
	return nil
}
