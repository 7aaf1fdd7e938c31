package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/config/watch"
	"github.com/veerhq/veer/dnsserver"
	"github.com/veerhq/veer/dnsserver/dnsfile"
	"github.com/veerhq/veer/dnsserver/dnsstore"
	"github.com/veerhq/veer/dnsserver/doh"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/store"
)

func init() { subcommands = append(subcommands, newDNSCmd) }

func newDNSCmd() *cobra.Command {
	var (
		cfgPath, check, dataPath, metrics string
		logFormat, logLevel               string
	)
	cmd := &cobra.Command{
		Use:   "dns",
		Short: "Serve the private authoritative DNS (ZNS) of the last mile",
		Long: `dns serves veer's private authoritative DNS: the zones and health-aware
access domains of the config file, over UDP and TCP on one port, DNS over
TLS and DNS over HTTPS (HTTP/2 and HTTP/3) when configured. It never
recurses: names outside its zones are REFUSED.

The config file is watched: a valid change (zones, access nodes, regions,
limits) is applied without dropping a query; an invalid one is logged with
its file:line and the old config keeps serving. SIGHUP re-reads it at once.
Listener fields cannot change while running. --data FILE serves the zones
and regions of a separate, watched file instead. regions_file: FILE takes
the regions from veer control's routing table file (the one "veer control
put routing/table FILE" stores), watched like the config. A control_store section
(etcd endpoints) serves the zones (document dns/zones) and access nodes
(access/nodes, the scheduling API's) of the control plane's store instead,
followed as they change; an invalid document keeps the last good data.
With --metrics, the access nodes' health checks are served at
/access/health beside /metrics, and the server announces that listener in
the control store (announce_store, default control_store) for the web
console. docs/dns.md documents every field; examples/dns.yaml
is a start.`,
		Example: `  veer dns --check examples/dns.yaml
  veer dns --config examples/dns.yaml --metrics 127.0.0.1:9153`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if check != "" {
				return checkDNS(out, check)
			}
			if cfgPath == "" {
				return errors.New("dns: --config FILE or --check FILE is required")
			}
			log, err := obs.NewLogger(cmd.ErrOrStderr(), logFormat, logLevel)
			if err != nil {
				return err
			}
			reg := obs.NewRegistry()
			// The watcher's first apply builds the server; later ones reload it.
			var srv *dnsserver.Server
			data := &dnsData{}
			regions := &regionsFollower{opts: watch.Options{Name: "dns-regions", Logger: log, Registerer: reg}, apply: data.setRegions}
			defer regions.Close()
			w, err := watch.File(cfgPath, watch.Options{Name: "dns", Logger: log, Registerer: reg}, func(f dnsFile) error {
				if err := f.loadRegionsFile(cfgPath); err != nil {
					return err
				}
				if f.RegionsFile != "" && dataPath != "" {
					return errors.New("dns: --data and the config's regions_file both set: pick one source of regions")
				}
				if srv == nil {
					var err error
					srv, err = dnsserver.New(f.Config, dnsserver.Options{Logger: log, Registerer: reg})
					data.srv, data.store, data.ann, data.last = srv, f.ControlStore, f.AnnounceStore, f
					return err
				}
				if err := data.reload(f); err != nil {
					return err
				}
				if err := regions.follow(f.regionsPath(cfgPath)); err != nil {
					log.Warn("dns: regions_file not followed; its regions stay as read", "err", err)
				}
				return nil
			})
			if err != nil {
				return err
			}
			defer w.Close()
			if err := regions.follow(w.Current().regionsPath(cfgPath)); err != nil {
				return err
			}
			if data.store != nil && dataPath != "" {
				return errors.New("dns: --data and the config's control_store both set: pick one source")
			}
			if err := srv.Start(); err != nil {
				return err
			}
			defer srv.Close()
			fmt.Fprintf(out, "veer dns: udp+tcp %s\n", srv.Addr())
			if a := srv.DoTAddr(); a.IsValid() {
				fmt.Fprintf(out, "veer dns: dot %s\n", a)
			}
			if c := srv.Config(); c.DoHListen != "" {
				d, err := doh.New(doh.ConfigFrom(c), srv, doh.Options{Logger: log})
				if err != nil {
					return err
				}
				if err := d.Start(); err != nil {
					return err
				}
				defer d.Close()
				fmt.Fprintf(out, "veer dns: doh %s (HTTP/2 and HTTP/3)\n", d.URL())
			}
			if metrics != "" {
				stop, addr, err := serveDNSMetrics(metrics, reg, srv.HealthHandler())
				if err != nil {
					return err
				}
				defer stop()
				fmt.Fprintf(out, "veer dns: metrics http://%s/metrics\n", addr)
				fmt.Fprintf(out, "veer dns: access nodes' health http://%s%s\n", addr, dnsserver.NodeHealthPath)
				metrics = addr
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if sc := (dnsFile{ControlStore: data.store, AnnounceStore: data.ann}).announceStore(); sc != nil && metrics != "" {
				stop, err := runAnnounce(ctx, sc, metrics, log)
				if err != nil {
					return err
				}
				defer stop()
			}
			if dataPath != "" {
				src := dnsfile.Source{Path: dataPath, Logger: log, Registerer: reg}
				errc := make(chan error, 1)
				sctx, cancel := context.WithCancel(ctx)
				defer func() { cancel(); <-errc }()
				go func() { errc <- src.Run(sctx, data.set) }()
			}
			if data.store != nil {
				stop, err := runStoreSource(ctx, data, log, reg)
				if err != nil {
					return err
				}
				defer stop()
				fmt.Fprintf(out, "veer dns: data from the control store %v (%s, %s)\n", data.store.Endpoints, dnsstore.KeyZones, store.KeyAccess)
			}
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-hup:
					if err := w.Reload(); err != nil {
						log.Warn("dns: reload on SIGHUP rejected", "err", err)
					}
				}
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "config", "", "config file to serve (YAML or JSON), watched for changes")
	f.StringVar(&check, "check", "", "validate this config file and exit (non-zero with file:line: field errors)")
	f.StringVar(&dataPath, "data", "", "serve zones and regions from this watched file instead of the config's")
	f.StringVar(&metrics, "metrics", "", "serve Prometheus metrics at this address (/metrics)")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

// checkDNS validates a config file and summarises it.
func checkDNS(out io.Writer, path string) error {
	var f dnsFile
	if err := config.Load(path, &f); err != nil {
		return err
	}
	if err := f.loadRegionsFile(path); err != nil {
		return err
	}
	c := f.Config
	records, access, nodes := 0, 0, 0
	for _, z := range c.Zones {
		records += len(z.Records)
		access += len(z.Access)
		for _, a := range z.Access {
			nodes += len(a.Nodes)
		}
	}
	_, err := fmt.Fprintf(out, "%s: OK: %d zones, %d records, %d access domains with %d nodes, %d region rows\n",
		path, len(c.Zones), records, access, nodes, len(c.Regions))
	if err == nil && f.ControlStore != nil {
		_, err = fmt.Fprintf(out, "%s: data from the control store %v (%s, %s)\n", path, f.ControlStore.Endpoints, dnsstore.KeyZones, store.KeyAccess)
	}
	return err
}

// serveDNSMetrics serves g's /metrics and the access nodes' health
// (dnsserver.NodeHealthPath) on addr until stop is called.
func serveDNSMetrics(addr string, g prometheus.Gatherer, health http.Handler) (stop func(), bound string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", obs.Handler(g))
	mux.Handle(dnsserver.NodeHealthPath, health)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(ln) }()
	return func() { hs.Close(); <-done }, ln.Addr().String(), nil
}
