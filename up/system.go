package up

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/dnsserver/dnsstore"
	"github.com/veerhq/veer/internal/localca"
	"github.com/veerhq/veer/obs"
)

// The loopback addresses of the two sites' gateways: one port, two IPs, so
// that the private DNS's A records alone say where a domain lives.
const (
	siteAIP = "127.0.0.2"
	siteBIP = "127.0.0.3"
)

// Options are run-time wiring; the zero value works.
type Options struct {
	// DataDir keeps the CA, the control plane's store, configs, logs and
	// the state file; empty: a temporary directory removed by Close.
	DataDir string
	// Exe is the veer binary the child processes run; default
	// os.Executable().
	Exe string
	// ChildEnv is added to the children's environment (tests).
	ChildEnv []string
	// Logger; default a text logger on os.Stderr at warn level.
	Logger *slog.Logger
}

// Proc is one child process in the state file.
type Proc struct {
	Pid   int      `json:"pid"`
	Addrs []string `json:"addrs"`
	Admin string   `json:"admin,omitempty"`
}

// State is the state file (DataDir/StateFile): what `veer chaos` needs to
// find a running `veer up`.
type State struct {
	PID      int               `json:"pid"`
	API      string            `json:"api"`
	DataDir  string            `json:"data_dir"`
	Temp     bool              `json:"temp"`
	Control  string            `json:"control"`
	Admin    string            `json:"admin"`
	DNS      string            `json:"dns"`
	DNSPid   int               `json:"dns_pid"`
	Public   string            `json:"public_dns"`
	Port     int               `json:"port"`
	Token    string            `json:"gateway_admin_token"`
	Gateways map[string]Proc   `json:"gateways"`
	Backends map[string]Proc   `json:"backends"`
	Domains  map[string]string `json:"domains"` // domain -> site
	// ControlTokenFile holds the control plane's admin token, for the
	// operator's playbooks (site-down).
	ControlTokenFile string `json:"control_token_file"`
	// Engines: the control store and the limits' Redis (engines.go).
	Engines Engines `json:"engines"`
	// NATS is the nats-server child's URL (async.nats local), NATSPid its
	// pid.
	NATS    string `json:"nats,omitempty"`
	NATSPid int    `json:"nats_pid,omitempty"`
	// ControlStore is the etcd endpoints of the control plane's store,
	// which the gateways follow (release documents); empty: embedded.
	ControlStore []string `json:"control_store,omitempty"`
	// AsyncEphemeral: the gateways' queue store does not survive a
	// restart (async.ephemeral, a FAIL-when-off setting).
	AsyncEphemeral bool `json:"async_ephemeral,omitempty"`
}

// StateFile is the state file's name in the data directory.
const StateFile = "up.json"

// System is a running `veer up`.
type System struct {
	cfg  Config
	opts Options
	log  *slog.Logger
	temp bool
	dir  string

	stats *Stats
	reg   *prometheus.Registry

	mu       sync.Mutex
	state    State
	children []*child
	gateways map[string]*child
	backends map[string]*child
	dnsChild *child
	// the engines (engines.go): etcd and redis-server when "local"
	engines    Engines
	etcdChild  *child
	redisChild *child
	public     *publicDNS
	ctrl       *control.Service
	ctrlDone   <-chan error
	api        *http.Server
	devMu      sync.Mutex // guards devices after Start (POST /v1/devices adds)
	devices    []*device
	nextDev    int // the index of the next device's ID
	env        *deviceEnv
	runCtx     context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	closed     bool
	started    time.Time
	picked     map[int]bool // ports handed out by freeAddr

	natsChild *child // async.nats local
	natsURL   string
	async     asyncStats  // the steady async submitter's counts
	relLoad   releaseLoad // the release scenarios' load

	added map[string]*launched // AddDevices' devices by ID, guarded by devMu (newdevices.go)
}

// New validates cfg; Start runs the system.
func New(cfg Config, opts Options) (*System, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if opts.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.Exe = exe
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return &System{cfg: cfg, opts: opts, log: log, stats: newStats(), reg: prometheus.NewRegistry(),
		gateways: map[string]*child{}, backends: map[string]*child{}, picked: map[int]bool{}}, nil
}

// freePort returns a port free on TCP and UDP for every ip.
func freePort(ips ...string) (int, error) {
	for range 100 {
		ln, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		var held []io.Closer
		held = append(held, ln)
		ok := true
		for i, ip := range ips {
			if i > 0 {
				l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
				if err != nil {
					ok = false
					break
				}
				held = append(held, l)
			}
			pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			held = append(held, pc)
		}
		for _, h := range held {
			h.Close()
		}
		if ok {
			return port, nil
		}
	}
	return 0, errors.New("up: no free port")
}

// freeAddr returns a loopback address free now and not handed out
// before by this System (the kernel may offer a port again once its probe
// listener is closed; a child binds it only later).
func (s *System) freeAddr() (string, error) {
	for range 100 {
		p, err := freePort("127.0.0.1")
		if err != nil {
			return "", err
		}
		if !s.picked[p] {
			s.picked[p] = true
			return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
		}
	}
	return "", errors.New("up: no free port")
}

// Start brings the system up and returns once the population is
// bootstrapped and sending. On error everything started is stopped.
func (s *System) Start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.opts.DataDir == "" {
		if s.dir, err = os.MkdirTemp("", "veer-up-"); err != nil {
			return err
		}
		s.temp = true
	} else {
		s.dir = s.opts.DataDir
		if err = os.MkdirAll(s.dir, 0o700); err != nil {
			return err
		}
	}
	for _, d := range []string{"logs", "gateways", "devices"} {
		if err = os.MkdirAll(filepath.Join(s.dir, d), 0o700); err != nil {
			return err
		}
	}
	ectx, ecancel := context.WithTimeout(ctx, 30*time.Second)
	err = s.startEngines(ectx)
	ecancel()
	if err != nil {
		return err
	}
	ca, err := localca.Open(filepath.Join(s.dir, "ca"))
	if err != nil {
		return err
	}
	zone := s.cfg.Zone
	dom := func(n string) string { return n + "." + zone }
	s.state = State{PID: os.Getpid(), DataDir: s.dir, Temp: s.temp, Gateways: map[string]Proc{}, Backends: map[string]Proc{},
		Domains: map[string]string{dom("a"): "a", dom("b"): "b"}, AsyncEphemeral: s.cfg.Async.Ephemeral,
		ControlStore: s.controlStore().Endpoints}
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	s.state.Token = hex.EncodeToString(tok)

	// backends: three clusters over two sites, one process per cluster
	clusters := []struct{ name, site string }{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}}
	backendAddrs := map[string][]string{}
	for _, c := range clusters {
		var addrs []string
		for range 2 {
			a, err := s.freeAddr()
			if err != nil {
				return err
			}
			addrs = append(addrs, a)
		}
		backendAddrs[c.name] = addrs
		ch := s.newChild("backend-"+c.name, "up", "backend", "--cluster", c.name, "--listen", strings.Join(addrs, ","),
			"--cpu", s.cfg.Backend.CPU.String(), "--latency", s.cfg.Backend.Latency.String(),
			"--feed-slots", strconv.Itoa(s.cfg.Backend.FeedSlots), "--report", s.cfg.Backend.Report.String())
		s.backends[c.name] = ch
		if err := ch.start(); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, c := range clusters {
		if err := waitTCP(wctx, backendAddrs[c.name]...); err != nil {
			return fmt.Errorf("backend %s: %w (log %s)", c.name, err, s.logPath("backend-"+c.name))
		}
	}

	// the async queue's NATS, when --nats local asks veer up to run it
	if err := s.startNATS(wctx); err != nil {
		return err
	}

	// gateways: one per site, child processes of the same binary
	port, err := freePort(siteAIP, siteBIP)
	if err != nil {
		return fmt.Errorf("%w (are 127.0.0.2 and 127.0.0.3 on loopback?)", err)
	}
	s.state.Port = port
	sites := []struct {
		name, ip string
		clusters []string
	}{{"a", siteAIP, []string{"a1", "a2"}}, {"b", siteBIP, []string{"b1"}}}
	gwAddrs := map[string][2]string{}
	for _, site := range sites {
		admin, err := s.freeAddr()
		if err != nil {
			return err
		}
		dir := filepath.Join(s.dir, "gateways", site.name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		if err := ca.IssueFiles([]string{dom(site.name), dom("wap"), site.ip}, cert, key); err != nil {
			return err
		}
		path := filepath.Join(dir, "gateway.yaml")
		if err := os.WriteFile(path, []byte(s.gatewayYAML(site.ip, port, admin, dir, cert, key, site.clusters, backendAddrs)), 0o600); err != nil {
			return err
		}
		ch := s.newChild("gateway-"+site.name, "gateway", "--config", path, "--log-format", "json")
		if s.cfg.Async.Ephemeral {
			ch.preStart = func() { _ = os.RemoveAll(filepath.Join(dir, "async")) }
		}
		s.gateways[site.name] = ch
		gwAddrs[site.name] = [2]string{net.JoinHostPort(site.ip, strconv.Itoa(port)), admin}
		if err := ch.start(); err != nil {
			return err
		}
	}
	for name, a := range gwAddrs {
		if err := waitTCP(wctx, a[0], a[1]); err != nil {
			return fmt.Errorf("gateway %s: %w (log %s)", name, err, s.logPath("gateway-"+name))
		}
	}
	s.mu.Lock()
	for name, a := range gwAddrs {
		s.state.Gateways[name] = Proc{Addrs: []string{a[0]}, Admin: a[1]}
	}
	for name, a := range backendAddrs {
		s.state.Backends[name] = Proc{Addrs: a}
	}
	s.mu.Unlock()

	// private DNS, in-process: the access domains, health-checked
	dnsAddr, err := s.freeAddr()
	if err != nil {
		return err
	}
	ctrlAddr := "127.0.0.1:0" // in-process: Run reports the bound port
	ps := strconv.Itoa(port)
	ctrlIP, _, _ := net.SplitHostPort(ctrlAddr)
	ddir := filepath.Join(s.dir, "dns")
	if err := os.MkdirAll(ddir, 0o700); err != nil {
		return err
	}
	dnsPath := filepath.Join(ddir, "dns.yaml")
	node := func(ip string) string { return fmt.Sprintf("{addr: %s, check: \"tcp://%s:%s\"}", ip, ip, ps) }
	dnsYAML := fmt.Sprintf(`listen: %q
health: {interval: 1s, timeout: 500ms}
zones:
  - origin: %s.
    records: ["ns1 A 127.0.0.1", "route 30 A %s"]
    access:
      - {name: a, ttl: 10, nodes: [%s]}
      - {name: b, ttl: 10, nodes: [%s]}
      - {name: wap, ttl: 10, nodes: [%s, %s]}
`, dnsAddr, zone, ctrlIP, node(siteAIP), node(siteBIP), node(siteAIP), node(siteBIP))
	if err := os.WriteFile(dnsPath, []byte(dnsYAML), 0o600); err != nil {
		return err
	}
	s.dnsChild = s.newChild("dns", "dns", "--config", dnsPath, "--log-format", "json")
	if err := s.dnsChild.start(); err != nil {
		return err
	}
	if err := waitTCP(wctx, dnsAddr); err != nil {
		return fmt.Errorf("dns: %w (log %s)", err, s.logPath("dns"))
	}
	// the devices' public resolver (seed 002's first step), which chaos
	// can turn into a hijacker
	s.public, err = startPublicDNS(map[string][]string{
		dom("a") + ".": {siteAIP}, dom("b") + ".": {siteBIP}, dom("wap") + ".": {siteAIP, siteBIP}, dom("route") + ".": {ctrlIP}})
	if err != nil {
		return err
	}
	s.state.DNS = dnsAddr

	// control plane, in-process: embedded store, the routing table
	cdir := filepath.Join(s.dir, "control")
	if err := os.MkdirAll(cdir, 0o700); err != nil {
		return err
	}
	ccert, ckey := filepath.Join(cdir, "public.crt"), filepath.Join(cdir, "public.key")
	if err := ca.IssueFiles([]string{dom("route"), ctrlIP}, ccert, ckey); err != nil {
		return err
	}
	adminAddr := "127.0.0.1:0"
	s.ctrl, err = control.New(control.Config{DataDir: cdir, Listen: ctrlAddr, AdminListen: adminAddr, CertFile: ccert, KeyFile: ckey, Etcd: s.controlStore()},
		control.Options{Logger: s.log, Registerer: s.reg, Documents: map[string]func([]byte) error{dnsstore.KeyZones: dnsstore.ValidateZones}})
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	if err := s.putTable(wctx); err != nil {
		return fmt.Errorf("control: routing table: %w", err)
	}
	s.state.ControlTokenFile, _ = s.ctrl.AdminTokenFile()
	rctx, rcancel := context.WithCancel(context.Background())
	s.cancel, s.runCtx = rcancel, rctx
	addrs, done := s.ctrl.Run(rctx)
	s.ctrlDone = done
	select {
	case err := <-done:
		s.ctrlDone = nil
		return fmt.Errorf("control: %w", err)
	case <-s.ctrl.Ready():
	case <-wctx.Done():
		return fmt.Errorf("control: not ready: %w", wctx.Err())
	}
	s.state.Control, s.state.Admin = addrs.Public, addrs.Admin
	_, cport, _ := net.SplitHostPort(addrs.Public)

	// the API that `veer chaos` and the terminal view read
	if err := s.serveAPI(); err != nil {
		return err
	}

	// the population
	env := &deviceEnv{cfg: s.cfg, roots: ca.Pool(), dnsAddr: dnsAddr, publicDNS: s.public.addr, gwPort: port,
		routeURL:   "https://" + dom("route") + ":" + cport + "/v1/route",
		publicKey:  control.PublicKeyString(s.ctrl.PublicKey()),
		defaultDom: dom("wap"), defaultBk: []string{dom("b")},
		sites:    map[string]string{dom("a"): "a", dom("b"): "b", dom("wap"): "wap"},
		stateDir: filepath.Join(s.dir, "devices"), reg: s.reg, log: s.log, stats: s.stats}
	s.env = env
	devs := make([]*device, s.cfg.Devices)
	errs := make([]error, s.cfg.Devices)
	var bw sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range devs {
		bw.Add(1)
		sem <- struct{}{}
		go func() {
			defer bw.Done()
			defer func() { <-sem }()
			devs[i], errs[i] = newDevice(wctx, env, i)
		}()
	}
	bw.Wait()
	for i := range devs {
		if errs[i] != nil {
			for _, d := range devs {
				if d != nil {
					d.close()
				}
			}
			return fmt.Errorf("device %d: %w", i, errs[i])
		}
	}
	s.devMu.Lock()
	s.devices = append(s.devices, devs...)
	s.nextDev = len(devs)
	s.started = time.Now()
	s.devMu.Unlock()
	for _, d := range devs {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); d.run(rctx, env) }()
	}
	for _, site := range []string{"a", "b"} {
		s.wg.Go(func() { s.runAsync(rctx, site) })
	}
	return s.writeState()
}

func (s *System) logPath(name string) string { return filepath.Join(s.dir, "logs", name+".log") }

func (s *System) newChild(name string, args ...string) *child {
	c := &child{name: name, exe: s.opts.Exe, args: args, env: s.opts.ChildEnv, logPath: s.logPath(name),
		restart: s.cfg.RestartAfter, log: s.log}
	c.onStart = func() {
		if err := s.writeState(); err != nil {
			s.log.Warn("state file", "err", err)
		}
	}
	s.children = append(s.children, c)
	return c
}

// gatewayYAML is a site's gateway config: what a user writes (routes,
// clusters, backends, a health path) plus shedding, breakers and the
// trusted loopback network for the criticality header.
func (s *System) gatewayYAML(ip string, port int, admin, dir, cert, key string, clusters []string, backends map[string][]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: {addr: %q, cert_file: %q, key_file: %q, shutdown_timeout: 2s}\n", net.JoinHostPort(ip, strconv.Itoa(port)), cert, key)
	fmt.Fprintf(&b, "admin: {addr: %q, token: %q}\n", admin, s.state.Token)
	fmt.Fprintf(&b, "data_dir: %q\n", dir)
	var rc []string
	for _, c := range clusters {
		rc = append(rc, "{name: "+c+"}")
	}
	list := "[" + strings.Join(rc, ", ") + "]"
	fmt.Fprintf(&b, "routes:\n  - {name: trips, path_prefix: %s, clusters: %s}\n  - {name: feed, path_prefix: %s, clusters: %s}\n  - {name: search, path_prefix: %s, clusters: %s}\n  - {name: reports, path_prefix: %s, async: true, clusters: %s}\n  - {name: %s, path_prefix: %s, clusters: [{name: a1}, {name: a2}]}\n  - {name: default, clusters: %s}\n",
		PathTrips, list, PathFeed, list, PathSearch, list, PathReports, list, releaseRoute, PathProfile, list)
	b.WriteString(s.limitsYAML())
	b.WriteString(s.asyncYAML())
	b.WriteString(s.releaseYAML())
	b.WriteString("clusters:\n")
	for _, c := range withReleaseClusters(clusters) {
		var bs []string
		for _, a := range backends[c] {
			bs = append(bs, fmt.Sprintf("{address: %q}", a))
		}
		iv := s.cfg.Gateway.HealthInterval
		fmt.Fprintf(&b, "  - {name: %s, backends: [%s], health: {path: %s, interval: %s, timeout: %s, fall: %d}}\n",
			c, strings.Join(bs, ", "), BackendHealth, iv, min(iv, time.Second), s.cfg.Gateway.HealthFall)
	}
	if s.cfg.Gateway.RetryDisabled {
		b.WriteString("retry: {disabled: true}\n")
	}
	// the feed route's shedding limit starts at what its serving cluster
	// runs at once (two backends x feed slots), so that the limiter learns
	// the unloaded latency rather than a backend's queue (the gateway's
	// default start, 256, is far above it; see docs/chaos.md)
	fmt.Fprintf(&b, "shed: {enabled: %t, endpoints: [{name: feed, limit: {initial: %d}}]}\n", !s.cfg.Gateway.ShedDisabled, 2*s.cfg.Backend.FeedSlots)
	b.WriteString("breaker: {enabled: true}\ntrusted_networks: [127.0.0.0/8]\n")
	return b.String()
}

// routingTable is the control plane's routing/table: one region
// (loopback) on site a, a bucket rule moving SiteBShare % of devices to
// site b; each site the other's sibling.
func (s *System) routingTable() string {
	z := s.cfg.Zone
	return fmt.Sprintf(`default_domain: wap.%[1]s
ttl_seconds: 3600
salt: veer-up
regions:
  - {name: loopback, cidrs: [127.0.0.0/8], site: a}
sites:
  - {name: a, sibling: b, clusters: [{name: a, domain: a.%[1]s}]}
  - {name: b, sibling: a, clusters: [{name: b, domain: b.%[1]s}]}
rules:
  - {name: share-b, bucket: {by: device, from: 0, to: %[2]d}, site: b}
`, z, s.cfg.SiteBShare)
}

// Stats reads the population's counters and states.
func (s *System) Stats() Snapshot {
	snap := s.stats.snapshot()
	snap.States = map[string]int{}
	devs := s.devs()
	snap.RecoveryBy = map[string]time.Time{}
	for _, d := range devs {
		snap.States[d.group+"/"+d.state()]++
		if d.ft != nil {
			if t := d.ft.RecoveryAt(); t.After(snap.RecoveryBy[d.group]) {
				snap.RecoveryBy[d.group] = t
			}
		}
	}
	snap.Devices = len(devs)
	s.devMu.Lock()
	snap.Started = s.started
	s.devMu.Unlock()
	snap.RequestTimeout, snap.FeedCapacity = s.cfg.RequestTimeout, s.cfg.FeedCapacity()
	return snap
}

// State is the current state file content.
func (s *System) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state
	st.Gateways, st.Backends = map[string]Proc{}, map[string]Proc{}
	for k, v := range s.state.Gateways {
		v.Pid = s.gateways[k].Pid()
		st.Gateways[k] = v
	}
	for k, v := range s.state.Backends {
		v.Pid = s.backends[k].Pid()
		st.Backends[k] = v
	}
	if s.dnsChild != nil {
		st.DNSPid = s.dnsChild.Pid()
	}
	if s.natsChild != nil {
		st.NATSPid = s.natsChild.Pid()
	}
	if s.public != nil {
		st.Public = s.public.addr
	}
	st.Engines = s.enginesState()
	return st
}

func (s *System) writeState() error {
	s.mu.Lock()
	ready := s.state.API != ""
	s.mu.Unlock()
	if !ready {
		return nil
	}
	return writeJSON(filepath.Join(s.dir, StateFile), s.State())
}

// DataDir is where the system keeps its files.
func (s *System) DataDir() string { return s.dir }

// Close stops the population, the services and every child process, and
// removes a temporary data directory.
func (s *System) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.devMu.Lock() // AddDevices starts no device after this
	if s.cancel != nil {
		s.cancel()
	}
	s.devMu.Unlock()
	s.wg.Wait()
	_ = s.StartReleaseLoad(0, 0) // stops the release load and waits for it
	for _, d := range s.devs() {
		d.close()
	}
	var errs []error
	if s.api != nil {
		errs = append(errs, s.api.Close())
	}
	if s.ctrl != nil {
		if s.ctrlDone != nil { // Run closes the service when its context ends
			errs = append(errs, <-s.ctrlDone)
		} else {
			errs = append(errs, s.ctrl.Close())
		}
	}
	if s.public != nil {
		s.public.close()
	}
	var cw sync.WaitGroup
	for _, c := range s.children {
		cw.Add(1)
		go func() { defer cw.Done(); c.stop() }()
	}
	cw.Wait()
	if s.dir != "" {
		if s.temp {
			errs = append(errs, os.RemoveAll(s.dir))
		} else {
			_ = os.Remove(filepath.Join(s.dir, StateFile))
		}
	}
	return errors.Join(errs...)
}

var _ = config.Field
var _ = obs.Discard
