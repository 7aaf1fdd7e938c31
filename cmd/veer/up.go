package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/up"
)

func init() { subcommands = append(subcommands, newUpCmd) }

// upPointer is where a `veer up` without --data records its temporary data
// directory, so that `veer chaos` finds it.
func upPointer() string { return filepath.Join(os.TempDir(), "veer-up.current") }

func newUpCmd() *cobra.Command {
	var (
		cfgFile, dataDir string
		devices          int
		duration, every  time.Duration
		logLevel         string
		storeURL, redis  string
		natsURL          string
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the whole system on this machine: control, private DNS, two gateways, backends and a client population",
		Long: `up starts, with nothing installed, the control plane (embedded store), the
private DNS serving the access domains, two gateways (sites a and b, child
processes of this binary), demo backends in three clusters (a1, a2 on site
a, b1 on site b; one child process per cluster) and N devices, each running
the real client SDK (routing.Bootstrap -> lastmile over the private DNS ->
failover -> tier) behind its own emulated network. Everything listens on
loopback ports chosen free and printed. One local CA (DATA/ca) issues every
certificate. A terminal view refreshes each second (plain lines every
--every when stdout is not a terminal). Ctrl-C stops everything and removes
the temporary data directory. docs/up.md has the details; "veer chaos"
breaks it on purpose.`,
		Example: `  veer up
  veer up --devices 200 --data ./veer-up-data
  veer up --config up.yaml
  veer up --store etcd://local --redis local
  veer up --store etcd://10.0.0.1:2379,10.0.0.2:2379 --redis redis://10.0.0.5:6379`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg up.Config
			if cfgFile != "" {
				if err := config.Load(cfgFile, &cfg); err != nil {
					return err
				}
			}
			if devices > 0 {
				cfg.Devices = devices
			}
			if storeURL != "" {
				cfg.Store = storeURL
			}
			if redis != "" {
				cfg.Redis = redis
			}
			if natsURL != "" {
				cfg.Async.NATS = natsURL
			}
			log, err := obs.NewLogger(cmd.ErrOrStderr(), "text", logLevel)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			return runUp(ctx, cmd.OutOrStdout(), cfg, up.Options{DataDir: dataDir, Logger: log, ChildEnv: childEnv()}, every)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgFile, "config", "", "config file (YAML or JSON, docs/up.md); none: the defaults")
	f.StringVar(&dataDir, "data", "", "keep the CA, the store, configs and logs here across runs; default a temporary directory removed at exit")
	f.IntVar(&devices, "devices", 0, fmt.Sprintf("client population (default %d, or the config's)", up.DefaultDevices))
	f.DurationVar(&duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	f.DurationVar(&every, "every", 5*time.Second, "interval of the plain view when stdout is not a terminal")
	f.StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	f.StringVar(&storeURL, "store", "", "control plane's store: etcd://local (veer up runs etcd) or etcd://HOST:PORT[,HOST:PORT]; default the embedded store")
	f.StringVar(&redis, "redis", "", "share the gateways' limits through Redis: local (veer up runs redis-server) or redis://HOST:PORT; default local limits")
	f.StringVar(&natsURL, "nats", "", "the async queue's NATS: local (veer up starts nats-server -js) or nats://HOST:PORT[,...] of an external cluster; default embedded JetStream in each gateway's data dir")
	cmd.AddCommand(newUpBackendCmd())
	return cmd
}

// childEnv is passed to the child processes (the test binary uses it to
// act as veer).
func childEnv() []string {
	if v := os.Getenv(envChild); v != "" {
		return []string{envChild + "=" + v}
	}
	return nil
}

const envChild = "VEER_TEST_AS_VEER"

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func runUp(ctx context.Context, out io.Writer, cfg up.Config, opts up.Options, every time.Duration) error {
	start := time.Now()
	sys, err := up.New(cfg, opts)
	if err != nil {
		return err
	}
	err = sys.Start(ctx)
	if err != nil {
		return err
	}
	defer sys.Close()
	st := sys.State()
	fmt.Fprintf(out, "veer up: started in %.1fs; data %s (state %s)\n", time.Since(start).Seconds(), st.DataDir, filepath.Join(st.DataDir, up.StateFile))
	fmt.Fprintf(out, "veer up: control https://%s (admin http://%s), private DNS %s, CA %s\n", st.Control, st.Admin, st.DNS, filepath.Join(st.DataDir, "ca", "ca.pem"))
	for _, name := range []string{"a", "b"} {
		g := st.Gateways[name]
		fmt.Fprintf(out, "veer up: gateway %s https://%s (pid %d, admin http://%s)\n", name, strings.Join(g.Addrs, ","), g.Pid, g.Admin)
	}
	for _, name := range []string{"a1", "a2", "b1"} {
		b := st.Backends[name]
		fmt.Fprintf(out, "veer up: backend cluster %s %s (pid %d)\n", name, strings.Join(b.Addrs, ","), b.Pid)
	}
	fmt.Fprintln(out, "veer up: "+engineLine(st.Engines))
	if st.NATS != "" {
		fmt.Fprintf(out, "veer up: nats-server %s (pid %d, store %s)\n", st.NATS, st.NATSPid, filepath.Join(st.DataDir, "nats"))
	}
	fmt.Fprintf(out, "veer up: %d devices sending; API http://%s/v1/stats; Ctrl-C stops\n", sys.Stats().Devices, st.API)
	if opts.DataDir == "" {
		if err := os.WriteFile(upPointer(), []byte(st.DataDir+"\n"), 0o600); err == nil {
			defer func() {
				if b, err := os.ReadFile(upPointer()); err == nil && strings.TrimSpace(string(b)) == st.DataDir {
					os.Remove(upPointer())
				}
			}()
		}
	}
	sys.Watch(ctx, out, isTerminal(out), every)
	fmt.Fprintln(out, "veer up: stopping")
	if err := sys.Close(); err != nil {
		slog.Warn("veer up: stop", "err", err)
	}
	fmt.Fprintln(out, "veer up: stopped")
	return nil
}

func newUpBackendCmd() *cobra.Command {
	var (
		cluster, listen string
		bc              up.BackendConfig
	)
	cmd := &cobra.Command{
		Use:    "backend",
		Short:  "Serve one demo backend cluster (a child process of veer up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return up.ServeBackends(cmd.Context(), cluster, strings.Split(listen, ","), bc)
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "cluster name")
	cmd.Flags().StringVar(&listen, "listen", "", "comma-separated listen addresses, one backend each")
	cmd.Flags().DurationVar(&bc.CPU, "cpu", 0, "CPU per /api/trips request")
	cmd.Flags().DurationVar(&bc.Latency, "latency", 0, "dependency wait per /api/trips request")
	cmd.Flags().IntVar(&bc.FeedSlots, "feed-slots", 0, "concurrent /api/feed requests per backend")
	cmd.Flags().DurationVar(&bc.Report, "report", 0, "dependency wait per /api/reports invocation (the async route)")
	return cmd
}

// engineLine says where the store and the limits live.
func engineLine(e up.Engines) string {
	s := "store: embedded"
	switch {
	case e.StoreLocal:
		s = fmt.Sprintf("store: etcd %s (child pid %d)", e.Store, e.EtcdPid)
	case e.Store != "":
		s = "store: etcd " + e.Store
	}
	l := fmt.Sprintf("limits: %s %.0f/s over both gateways, local (each gateway %.0f/s)", up.PathSearch, e.SearchLimit, e.SearchLimit/2)
	switch {
	case e.RedisLocal:
		l = fmt.Sprintf("limits: %s %.0f/s shared through Redis %s (child pid %d)", up.PathSearch, e.SearchLimit, e.Redis, e.RedisPid)
	case e.Redis != "":
		l = fmt.Sprintf("limits: %s %.0f/s shared through Redis %s", up.PathSearch, e.SearchLimit, e.Redis)
	}
	return s + "; " + l
}
