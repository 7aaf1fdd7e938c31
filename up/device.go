package up

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/failover"
	"github.com/veerhq/veer/internal/netem"
	"github.com/veerhq/veer/lastmile"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/routing"
	"github.com/veerhq/veer/tier"
)

// device is one app install running the real client SDK:
// routing.Bootstrap -> lastmile (private DNS) -> failover.Transport ->
// tier.Transport, behind its own emulated network (netem.Path).
type device struct {
	id      string
	group   string // the site its routing answer put it on
	primary string
	source  string // where its routing answer came from (routing.Source*)
	path    *netem.Path
	lm      *lastmile.Transport
	ft      *failover.Transport // nil when failover is off
	client  *http.Client
	rng     *rand.Rand
}

// deviceEnv is what every device shares.
type deviceEnv struct {
	cfg        Config
	roots      *x509.CertPool
	dnsAddr    string
	publicDNS  string
	gwPort     int
	routeURL   string
	publicKey  string
	defaultDom string
	defaultBk  []string
	sites      map[string]string // domain -> site
	stateDir   string
	reg        prometheus.Registerer
	log        *slog.Logger
	stats      *Stats
}

func newDevice(ctx context.Context, env *deviceEnv, i int) (*device, error) {
	cfg := env.cfg
	d := &device{id: fmt.Sprintf("dev-%04d", i), rng: rand.New(rand.NewPCG(uint64(i), 7))}
	d.path = netem.NewPath(netem.Config{OneWay: time.Duration(1+i%4) * cfg.OneWay, Loss: cfg.Loss, Seed: uint64(i)})
	dns, err := d.path.Via(env.dnsAddr)
	if err != nil {
		d.path.Close()
		return nil, err
	}
	public, err := d.path.Via(env.publicDNS)
	if err != nil {
		d.path.Close()
		return nil, err
	}
	dcfg := lastmile.DNSConfig{
		// seed 002: the public resolver first, then the private DNS (UDP,
		// then UDP and TCP raced); answers for the zone outside the
		// gateways' addresses are hijacked; the last good answer serves
		// stale when every source fails
		Order:          []lastmile.ResolverStep{lastmile.StepSystem, lastmile.StepPrivateUDP, lastmile.StepPrivateRace},
		PrivateServers: []string{dns},
		Timeout:        cfg.LastMile.DNSTimeout,
		SystemTTL:      10 * time.Second,
		Expected:       map[string][]string{cfg.Zone: {"127.0.0.0/30"}}, // 127.0.0.1-3: control, site a, site b
	}
	if cfg.LastMile.Unprotected {
		dcfg.Expected, dcfg.MaxStale = nil, -1
	}
	lm, err := lastmile.New(lastmile.Config{
		Steps: []lastmile.RouteStep{lastmile.StepDirect},
		Port:  env.gwPort,
		DNS:   dcfg,
		Race:  lastmile.RaceConfig{DisableH3: true}, // UDP would bypass the device's netem path
	}, lastmile.Options{RootCAs: env.roots, DialContext: d.path.Dial, Registerer: env.reg, Logger: env.log,
		SystemResolver: &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, network, public)
		}}})
	if err != nil {
		d.path.Close()
		return nil, err
	}
	d.lm = lm
	res, err := routing.Bootstrap(ctx, routing.Config{
		URL: env.routeURL, PublicKeys: []string{env.publicKey},
		DefaultDomain: env.defaultDom, DefaultBackups: env.defaultBk,
		StateFile: filepath.Join(env.stateDir, d.id+".route.json"),
	}, routing.Request{DeviceID: d.id, App: "veer-up-demo", AppVersion: "1", Platform: "sim"},
		routing.Options{Client: &http.Client{Transport: lm}, Logger: env.log})
	if err != nil {
		d.close()
		return nil, err
	}
	if res.Source != routing.SourceService {
		env.log.Warn("device bootstrap fell back", "device", d.id, "source", res.Source, "err", res.Err)
	}
	d.primary, d.source = res.Primary, res.Source
	d.group = env.sites[res.Primary]
	next := http.RoundTripper(lm)
	if !cfg.Failover.Disabled {
		d.ft, err = failover.NewTransport(failover.Config{
			Primary: res.Primary, Backups: res.Backups, // routing always gives one (issue 27)
			RecoveryTimeout:     cfg.Failover.RecoveryTimeout,
			RecoveryTimeoutStep: cfg.Failover.RecoveryTimeoutStep,
			CanaryTimeout:       cfg.RequestTimeout,
			Registerer:          env.reg, Logger: env.log,
		}, lm)
		if err != nil {
			d.close()
			return nil, fmt.Errorf("%s: failover: %w", d.id, err)
		}
		next = d.ft
	}
	d.client = &http.Client{Transport: &tier.Transport{Next: next, Self: "veer-up-demo"}}
	return d, nil
}

// state is the device's failover state ("PRIMARY", "BACKUP", ...); "OFF"
// without failover.
func (d *device) state() string {
	if d.ft == nil {
		return "OFF"
	}
	return d.ft.State().String()
}

// run sends requests at the configured rate until ctx ends: 70 % to the
// critical /api/trips, 30 % to the sheddable /api/feed.
func (d *device) run(ctx context.Context, env *deviceEnv) {
	interval := time.Duration(float64(time.Second) / env.cfg.Rate)
	// spread the population's first requests over one interval
	t := time.NewTimer(time.Duration(d.rng.Int64N(int64(interval) + 1)))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.once(ctx, env)
		t.Reset(time.Duration(float64(interval) * (0.5 + d.rng.Float64())))
	}
}

func (d *device) once(ctx context.Context, env *deviceEnv) {
	path, tr := PathTrips, tier.Critical
	if d.rng.IntN(10) < 3 {
		path, tr = PathFeed, tier.Sheddable
	}
	rctx, cancel := context.WithTimeout(tier.WithTier(ctx, tr), env.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, "https://"+d.primary+path, nil)
	if err != nil {
		return
	}
	domain := d.primary
	if d.ft != nil {
		domain = d.ft.Domain()
	}
	resp, err := d.client.Do(req)
	if ctx.Err() != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return // stopping: not the system's failure
	}
	r, cluster, reason := resultFail, "", ""
	if err != nil {
		reason = outcome.Classify(nil, err).Kind.String()
	} else {
		_, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		cluster = resp.Header.Get(HeaderCluster)
		o := outcome.Classify(resp, nil)
		reason = fmt.Sprintf("%d %s", resp.StatusCode, o.Kind)
		if h := resp.Header.Get(outcome.HeaderOutcome); h != "" {
			reason += " (Veer-Outcome " + h + ")"
		}
		switch {
		case rerr != nil && !errors.Is(rerr, io.EOF):
			r = resultFail
		case resp.StatusCode/100 == 2:
			r = resultOK
		case o.Kind == outcome.Overloaded || o.Kind == outcome.Limited:
			r = resultShed
		}
		if h := resp.Request.URL.Hostname(); h != "" {
			domain = h
		}
	}
	env.stats.record(d.group, strings.TrimSuffix(domain, fmt.Sprintf(":%d", env.gwPort)), cluster, tr.String(), reason, r)
}

func (d *device) close() {
	if d.ft != nil {
		d.ft.Close()
	}
	if d.lm != nil {
		d.lm.Close()
	}
	d.path.Close()
}

// networkChanged tells the SDK the device moved to another network: routes
// and pooled connections are dropped, the next request runs the chain.
func (d *device) networkChanged() {
	if d.ft != nil {
		d.ft.NetworkChanged()
		return
	}
	d.lm.NetworkChanged()
}
