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
child process, packets dropped with nftables), watches the population, and prints PASS or FAIL with the
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
			for _, s := range up.EngineScenarios() {
				fmt.Fprintf(cmd.OutOrStdout(), "%-18s seed %s  fault: %s\n%-18s          promise: %s\n%-18s          (only with veer up %s; SKIPPED against an engine veer up did not start)\n",
					s.Name, s.Seed, s.Fault, "", s.Promise, "", map[string]string{"redis-kill": "--redis local", "etcd-kill": "--store etcd://local"}[s.Name])
			}
			return nil
		},
	}
	run := &cobra.Command{
		Use:   "run NAME...|all",
		Short: "Run scenarios (all: every one, in order)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := up.CheckBlackhole(cc.Blackhole); err != nil {
				return fmt.Errorf("chaos: --%w", err)
			}
			for _, a := range args {
				if _, ok := up.Lookup(a); !ok && a != "all" {
					return fmt.Errorf("chaos: no scenario %q (veer chaos list)", a)
				}
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
			return runChaos(cmd.Context(), cmd.OutOrStdout(), dataDir, cfg, cc, args)
		},
	}
	f := run.Flags()
	f.StringVar(&dataDir, "data", "", "data directory of the veer up to break (default: the one running without --data)")
	f.IntVar(&devices, "devices", 0, "population of the veer up started when none runs")
	f.StringVar(&cfgFile, "config", "", "config file of the veer up started when none runs (docs/up.md)")
	f.DurationVar(&cc.Window, "window", 0, "measuring window (default 10s)")
	f.DurationVar(&cc.Detect, "detect", 0, "longest wait for the clients to react (default 30s)")
	f.DurationVar(&cc.Recover, "recover", 0, "longest wait for the return after the fault (default 60s)")
	f.StringVar(&cc.Blackhole, "blackhole", up.BlackholeAuto, blackholeUsage)
	cmd.AddCommand(list, run, newSoakCmd())
	return cmd
}

// errScenarioFailed makes the exit status 1 after every verdict printed.
var errScenarioFailed = errors.New("chaos: a scenario failed")

func runChaos(ctx context.Context, out io.Writer, dataDir string, cfg up.Config, cc up.ChaosConfig, names []string) error {
	api, stop, err := chaosTarget(ctx, out, dataDir, cfg)
	if err != nil {
		return err
	}
	defer stop()
	c := up.NewChaos(api, cc, out)
	var scs []up.Scenario
	for _, a := range names {
		if a == "all" {
			live, err := c.State(ctx) // "all": the scenarios this system has
			if err != nil {
				return err
			}
			scs = append(scs, up.Present(live)...)
			continue
		}
		s, _ := up.Lookup(a)
		scs = append(scs, s)
	}
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

// chaosTarget finds the running veer up (dataDir, or the one started
// without --data) or starts one with cfg; stop stops what it started.
func chaosTarget(ctx context.Context, out io.Writer, dataDir string, cfg up.Config) (api string, stop func(), err error) {
	dir := dataDir
	if dir == "" {
		if b, err := os.ReadFile(upPointer()); err == nil {
			dir = strings.TrimSpace(string(b))
		}
	}
	if dir != "" {
		st, err := up.ReadState(dir)
		if err != nil && !errors.Is(err, up.ErrNotRunning) {
			return "", nil, err
		}
		if err == nil {
			fmt.Fprintf(out, "chaos: against veer up pid %d (data %s)\n", st.PID, dir)
			return st.API, func() {}, nil
		} else if dataDir != "" {
			return "", nil, err
		}
	}
	log, err := obs.NewLogger(os.Stderr, "text", "warn")
	if err != nil {
		return "", nil, err
	}
	sys, err := up.New(cfg, up.Options{Logger: log, ChildEnv: childEnv()})
	if err != nil {
		return "", nil, err
	}
	start := time.Now()
	if err := sys.Start(ctx); err != nil {
		return "", nil, err
	}
	fmt.Fprintf(out, "chaos: no veer up running; started one (data %s) in %.1fs\n", sys.DataDir(), time.Since(start).Seconds())
	return sys.State().API, func() { _ = sys.Close() }, nil
}

func newSoakCmd() *cobra.Command {
	var (
		dataDir, cfgFile string
		devices          int
		cc               up.ChaosConfig
		sc               up.SoakConfig
	)
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Run the scenarios round-robin for a long time and report resource growth and errors outside the windows",
		Long: `soak plays the scenarios of a running "veer up" (or of its own) round-robin,
one every --every, for a warm-up (one round of the scenarios unless
--warm-up or --warm-up-rounds says otherwise) and --duration after it; samples RSS, PSS and goroutines summed
over veer up's processes every --sample; counts the population's requests
inside the scenarios' windows apart from those outside; and prints a
report: growth after warm-up (the minimum of each --growth-window, first
against last; target <= 10 %), every verdict, errors outside the windows.
The exit status is 1 when the soak does not PASS. docs/chaos.md, soak.`,
		Example: `  veer chaos soak --duration 30m --every 2m
  veer chaos soak --duration 40s --every 15s --scenarios cluster-kill,redis-kill`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := up.CheckBlackhole(cc.Blackhole); err != nil {
				return fmt.Errorf("chaos soak: --%w", err)
			}
			for _, n := range sc.Scenarios {
				if _, ok := up.Lookup(n); !ok {
					return fmt.Errorf("chaos soak: no scenario %q (veer chaos list)", n)
				}
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
			out := cmd.OutOrStdout()
			api, stop, err := chaosTarget(cmd.Context(), out, dataDir, cfg)
			if err != nil {
				return err
			}
			defer stop()
			rep, err := up.NewChaos(api, cc, out).Soak(cmd.Context(), sc)
			if err != nil {
				return err
			}
			fmt.Fprint(out, rep.String())
			if !rep.Pass {
				return errSoakFailed
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data", "", "data directory of the veer up to soak (default: the one running without --data)")
	f.IntVar(&devices, "devices", 0, "population of the veer up started when none runs")
	f.StringVar(&cfgFile, "config", "", "config file of the veer up started when none runs (docs/up.md)")
	f.DurationVar(&sc.Duration, "duration", 0, "how long (default 30m)")
	f.DurationVar(&sc.Every, "every", 0, "a scenario this often (default 2m)")
	f.DurationVar(&sc.Sample, "sample", 0, "resource sampling interval (default 30s)")
	f.DurationVar(&sc.WarmUp, "warm-up", 0, "samples before this are not part of the growth (default: --warm-up-rounds 1)")
	f.IntVar(&sc.WarmUpRounds, "warm-up-rounds", 0, "nor those before this many rounds of the scenarios have ended (default 1 when --warm-up is not set)")
	f.DurationVar(&sc.GrowthWindow, "growth-window", 0, "growth compares the minimum of the first such window with the last's (default 5m)")
	f.StringSliceVar(&sc.Scenarios, "scenarios", nil, "scenarios to play round-robin (default every one the system has)")
	f.DurationVar(&cc.Window, "window", 0, "each scenario's measuring window (default 10s)")
	f.StringVar(&cc.Blackhole, "blackhole", up.BlackholeAuto, blackholeUsage)
	return cmd
}

const blackholeUsage = "primary-blackhole's mechanism: auto (nftables packet drops when root and nft exist, else SIGSTOP), nft, sigstop"

var errSoakFailed = errors.New("chaos soak: not PASS")
