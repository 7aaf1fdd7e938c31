package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/config/watch"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/gateway/gatewayasync"
	"github.com/veerhq/veer/gateway/gatewayh3"
	"github.com/veerhq/veer/gateway/gatewayotel"
	"github.com/veerhq/veer/gateway/gatewayredis"
	"github.com/veerhq/veer/internal/gcfloor"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/store/storeetcd"
)

func init() { subcommands = append(subcommands, newGatewayCmd) }

func newGatewayCmd() *cobra.Command {
	var (
		path      string
		check     string
		logFormat string
		heapFloor int
	)
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Run the edge gateway (routes, clusters, health, retries, limits, shedding)",
		Long: `gateway runs veer's edge proxy from one YAML file (docs/gateway.md documents
every field; examples/gateway.yaml runs as is). It serves HTTP/1.1 and HTTP/2
over TLS and HTTP/3 on one port, routes by host and path prefix to clusters
of backends, retries failed requests on another cluster, and applies limits,
criticality shedding and per-cluster breakers.

The file is reloaded when it changes and on SIGHUP; an invalid file keeps the
config in force (logged as file:line: field: why, counted in
veer_gateway_reloads_total and veer_config_reloads_total). SIGTERM drains:
/readyz answers 503, listeners stop accepting, requests in flight finish
(listen.shutdown_timeout), then the process exits 0.

With a control_store section (etcd endpoints of the control plane), the
gateway follows the gateway/criticality and gateway/limits documents: while
present they replace the file's shed table and limits at run time; an
invalid document is logged and counted and the last good config stays.`,
		Example: `  veer gateway --check examples/gateway.yaml
  veer gateway --config examples/gateway.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if check != "" {
				var cfg gateway.Config
				if err := config.Load(check, &cfg); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d routes, %d clusters)\n", check, len(cfg.Routes), len(cfg.Clusters))
				return err
			}
			if path == "" {
				return fmt.Errorf("--config FILE is required")
			}
			var cfg gateway.Config
			if err := config.Load(path, &cfg); err != nil {
				return err
			}
			log, err := obs.NewLogger(cmd.ErrOrStderr(), logFormat, "info")
			if err != nil {
				return err
			}
			if heapFloor < 0 {
				return fmt.Errorf("--gc-heap-floor-mib %d: must be 0 (off) or more", heapFloor)
			}
			stopFloor, off := gcfloor.Start(uint64(heapFloor) << 20)
			defer stopFloor()
			if off != "" {
				log.Info("GC heap floor off", "why", off)
			}
			return runGateway(cmd.Context(), path, cfg, log)
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "gateway config file (YAML)")
	cmd.Flags().StringVar(&check, "check", "", "validate this config file and exit (status 1 and file:line: field: why when invalid)")
	cmd.Flags().StringVar(&logFormat, "log-format", "json", "log format: json or text")
	cmd.Flags().IntVar(&heapFloor, "gc-heap-floor-mib", gcfloor.DefaultFloor>>20,
		"let the heap grow to this many MiB before the garbage collector runs while the live heap is small (0: GOGC's 100 always; GOGC or GOMEMLIMIT in the environment turn it off)")
	cmd.AddCommand(newSLORulesCmd(), newDashboardCmd())
	return cmd
}

// runGateway serves until ctx ends (main cancels it on SIGTERM or
// interrupt), then drains.
func runGateway(ctx context.Context, path string, cfg gateway.Config, log *slog.Logger) error {
	reg := obs.NewRegistry()
	opts := gateway.Options{Logger: log, Registerer: reg, Gatherer: reg,
		SharedLimiter: gatewayredis.SharedLimiter(reg, log), HTTP3: gatewayh3.Listen,
		AsyncEngine: gatewayasync.Engine(log)}
	if tc := cfg.Tracing; tc.OTLPEndpoint != "" {
		exp, err := gatewayotel.New(gatewayotel.Config{Endpoint: tc.OTLPEndpoint, Insecure: tc.Insecure, ServiceName: tc.ServiceName})
		if err != nil {
			return fmt.Errorf("tracing: %w", err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = exp.Close(ctx)
		}()
		opts.OnSpan, opts.SampleNewTraces = exp.OnSpan, true
	}
	g, err := gateway.New(cfg, opts)
	if err != nil {
		return err
	}
	// SIGHUP is caught, and the file watched, before the listeners
	// announce themselves: a signal sent, or the file made invalid, as soon
	// as "gateway listening" is logged must reload (or keep the config in
	// force), not kill. The watcher's first read must succeed; an edit
	// between it and the load above is applied like any other.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	w, err := watch.File(path, watch.Options{Logger: log, Registerer: reg}, g.Apply)
	if err != nil {
		_ = g.Close()
		return err
	}
	defer w.Close()
	if err := g.Start(); err != nil {
		_ = g.Close()
		return err
	}
	stopFollow, err := followControlStore(g, cfg.ControlStore, log)
	if err != nil {
		_ = g.Close()
		return err
	}
	defer stopFollow()
	for {
		select {
		case err := <-g.Errors():
			_ = g.Close()
			return err
		case <-hup:
			// the watcher's reload: parse, validate, g.Apply; a rejected
			// file is logged and counted there and the old config stays
			_ = w.Reload()
		case <-ctx.Done():
			d := g.Config().Listen.ShutdownTimeout
			log.Info("draining", "timeout", d.String())
			dctx, cancel := context.WithTimeout(context.Background(), d)
			err := g.Shutdown(dctx)
			cancel()
			if err != nil {
				log.Error("drain did not finish in time", "err", err)
			}
			log.Info("stopped")
			return nil
		}
	}
}

// followControlStore starts the gateway's follower of the control plane's
// etcd (control_store); the returned func stops it and waits for it.
func followControlStore(g *gateway.Gateway, cs gateway.ControlStore, log *slog.Logger) (func(), error) {
	if len(cs.Endpoints) == 0 {
		return func() {}, nil
	}
	st, err := storeetcd.New(storeetcd.Config{Endpoints: cs.Endpoints, Prefix: cs.Prefix,
		DialTimeout: cs.DialTimeout, RequestTimeout: cs.RequestTimeout}, storeetcd.Options{})
	if err != nil {
		return nil, fmt.Errorf("control_store: %w", err)
	}
	log.Info("following the control store", "endpoints", cs.Endpoints)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.FollowStore(ctx, st, gateway.StoreOptions{})
	}()
	announced := make(chan struct{}) // the console reads the admin listener it names
	go func() {
		defer close(announced)
		if err := g.Announce(ctx, st, gateway.AnnounceOptions{}); err != nil {
			log.Info("not announced to the control store", "why", err)
		}
	}()
	return func() {
		cancel()
		<-done
		<-announced
		_ = st.Close()
	}, nil
}
