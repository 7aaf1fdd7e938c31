package failover

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
)

// rig is a Transport over a lab, on a manual clock, recording transitions,
// canaries and store writes.
type rig struct {
	clk   *clock.Manual
	tr    *Transport
	c     *http.Client
	ev    events
	can   canaries
	store notifyStore
	reg   *prometheus.Registry
	logs  *logRecorder
	path  string
}

func newRig(t *testing.T, l *lab, path string, mod func(*Config)) *rig {
	t.Helper()
	return newRigOver(t, l.client(), path, mod)
}

// newRigOver is newRig over any round tripper.
func newRigOver(t *testing.T, next http.RoundTripper, path string, mod func(*Config)) *rig {
	t.Helper()
	r := &rig{
		clk:   clock.NewManual(t0),
		ev:    make(events, 64),
		can:   make(canaries, 64),
		store: notifyStore{Store: FileStore(path), writes: make(chan string, 64)},
		reg:   prometheus.NewRegistry(),
		logs:  &logRecorder{},
		path:  path,
	}
	cfg := Config{
		Primary:          "primary.test",
		Backups:          []string{"dc1.test", "dc2.test"},
		Policy:           PolicyUber, // the seed's machine; veer has its own tests
		FailureThreshold: 3,
		Clock:            r.clk,
		Store:            r.store,
		Registerer:       r.reg,
		Logger:           slog.New(r.logs),
		OnTransition:     r.ev.on,
		OnCanary:         r.can.on,
	}
	if mod != nil {
		mod(&cfg)
	}
	tr, err := NewTransport(cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	r.tr = tr
	r.c = &http.Client{Transport: tr}
	t.Cleanup(func() { tr.Close() })
	return r
}

func (r *rig) wantState(t *testing.T, s State, domain string) {
	t.Helper()
	if r.tr.State() != s || r.tr.Domain() != domain {
		t.Fatalf("transport in %v on %s, want %v on %s", r.tr.State(), r.tr.Domain(), s, domain)
	}
}

// TestPrimaryDownBackupRecovery: primary's server goes away (real
// ECONNREFUSED); X failures start FAILOVER; canaries walk the backups in
// order (dc1 is down too, dc2 answers) and BACKUP moves traffic to dc2,
// which is saved; primary comes back, the recovery timer fires, the canary
// to primary succeeds and traffic returns, clearing the store.
func TestPrimaryDownBackupRecovery(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test", "dc2.test")
	r := newRig(t, l, filepath.Join(t.TempDir(), "failover.json"), nil)
	r.wantState(t, Primary, "primary.test")
	mustGet(t, r.c, "http://primary.test/a", "primary.test")

	l.down("primary.test")
	l.down("dc1.test")
	for range 2 {
		mustFail(t, r.c, "http://primary.test/a")
	}
	r.ev.none(t)
	mustFail(t, r.c, "http://primary.test/a")
	r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
	r.can.want(t, "dc1.test fail", "dc2.test ok")
	r.ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc2.test")
	r.store.want(t, "save dc2.test")
	r.wantState(t, Backup, "dc2.test")

	mustGet(t, r.c, "http://primary.test/b", "dc2.test")
	var regular []seen
	for _, v := range l.server("dc2.test").seen() {
		if v.canary == "" {
			regular = append(regular, v)
		}
	}
	if want := []seen{{host: "dc2.test", path: "/b", proto: 1}}; !slices.Equal(regular, want) {
		t.Fatalf("dc2 saw regular requests %+v, want %+v", regular, want)
	}
	if got, want := l.server("dc2.test").canaries(), []seen{{host: "dc2.test", path: DefaultCanaryPath, canary: "1", proto: 1}}; !slices.Equal(got, want) {
		t.Fatalf("dc2 saw canaries %+v, want %+v", got, want)
	}
	if saved, err := FileStore(r.path).Load(); saved != "dc2.test" || err != nil {
		t.Fatalf("store holds %q, %v; want dc2.test", saved, err)
	}

	// Primary is back; nothing happens before the recovery timer.
	l.up("primary.test")
	r.clk.Advance(DefaultRecoveryTimeout - 1)
	r.ev.none(t)
	r.clk.Advance(1)
	r.ev.want(t, Backup, Recovery, ReasonRecoveryTimer, "dc2.test")
	r.can.want(t, "primary.test ok")
	r.ev.want(t, Recovery, Primary, ReasonRecoverySuccess, "primary.test")
	r.store.want(t, "clear")
	mustGet(t, r.c, "http://primary.test/c", "primary.test")
	if _, err := os.Stat(r.path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("store file after return to primary: %v, want it removed", err)
	}

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"veer_failover_transitions_total", map[string]string{"from": "primary", "to": "failover", "reason": "failures"}, 1},
		{"veer_failover_transitions_total", map[string]string{"from": "failover", "to": "backup", "reason": "canary_success"}, 1},
		{"veer_failover_transitions_total", map[string]string{"from": "recovery", "to": "primary", "reason": "recovery_success"}, 1},
		{"veer_failover_canaries_total", map[string]string{"domain": "backup_1", "result": "failure"}, 1},
		{"veer_failover_canaries_total", map[string]string{"domain": "backup_2", "result": "success"}, 1},
		{"veer_failover_canaries_total", map[string]string{"domain": "primary", "result": "success"}, 1},
		{"veer_failover_requests_total", map[string]string{"domain": "primary"}, 5},
		{"veer_failover_requests_total", map[string]string{"domain": "backup_2"}, 1},
		{"veer_failover_state", map[string]string{"state": "primary"}, 1},
		{"veer_failover_state", map[string]string{"state": "backup"}, 0},
	} {
		if got := counter(t, r.reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if errs := obs.Lint(r.reg); len(errs) > 0 {
		t.Errorf("metric lint: %v", errs)
	}
}

// TestTunnel: the device loses the network (every dial fails) for a while.
// The backups are unreachable too, so nothing moves to BACKUP; when the
// network returns the first regular success restores PRIMARY.
func TestTunnel(t *testing.T) {
	for _, offline := range []bool{false, true} {
		t.Run(fmt.Sprintf("device_offline_check=%v", offline), func(t *testing.T) {
			l := newLab(t, "primary.test", "dc1.test", "dc2.test")
			r := newRig(t, l, filepath.Join(t.TempDir(), "f.json"), func(c *Config) { c.DeviceOfflineCheck = offline })
			mustGet(t, r.c, "http://primary.test/", "primary.test")

			l.setTunnel(true)
			for range 3 {
				mustFail(t, r.c, "http://primary.test/")
			}
			r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
			if offline {
				r.can.want(t, "dc1.test fail", "dc2.test fail", "primary.test fail")
				r.ev.want(t, Failover, Primary, ReasonDeviceOffline, "primary.test")
			} else {
				r.can.want(t, "dc1.test fail", "dc2.test fail")
				// another round after the retry interval, still cut off
				r.clk.Advance(DefaultCanaryRetryInterval)
				r.can.want(t, "dc1.test fail", "dc2.test fail")
				r.wantState(t, Failover, "primary.test")
			}
			r.ev.none(t)

			l.setTunnel(false)
			mustGet(t, r.c, "http://primary.test/", "primary.test")
			if !offline {
				r.ev.want(t, Failover, Primary, ReasonPrimarySuccess, "primary.test")
			}
			r.wantState(t, Primary, "primary.test")
			r.ev.none(t)
			if _, err := os.Stat(r.path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("store file: %v, want none (never in BACKUP)", err)
			}
		})
	}
}

// TestRestart: a Transport that ended in BACKUP saves the backup; a new one
// on the same store starts in BACKUP on it and still probes the primary on
// its recovery timer.
func TestRestart(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test", "dc2.test")
	path := filepath.Join(t.TempDir(), "failover.json")
	first := newRig(t, l, path, nil)
	l.down("primary.test")
	for range 3 {
		mustFail(t, first.c, "http://primary.test/")
	}
	first.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
	first.ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc1.test")
	if err := first.tr.Close(); err != nil {
		t.Fatal(err)
	}
	first.store.want(t, "save dc1.test")

	// app launch: straight into BACKUP on dc1
	second := newRig(t, l, path, nil)
	second.ev.want(t, Primary, Backup, ReasonRestored, "dc1.test")
	second.wantState(t, Backup, "dc1.test")
	mustGet(t, second.c, "http://primary.test/", "dc1.test")

	// primary still down: the probe fails, the next delay is longer
	second.clk.Advance(DefaultRecoveryTimeout)
	second.ev.want(t, Backup, Recovery, ReasonRecoveryTimer, "dc1.test")
	second.can.want(t, "primary.test fail")
	second.ev.want(t, Recovery, Backup, ReasonRecoveryFailure, "dc1.test")
	l.up("primary.test")
	second.clk.Advance(DefaultRecoveryTimeout + DefaultRecoveryTimeoutStep - 1)
	second.ev.none(t)
	second.clk.Advance(1)
	second.ev.want(t, Backup, Recovery, ReasonRecoveryTimer, "dc1.test")
	second.ev.want(t, Recovery, Primary, ReasonRecoverySuccess, "primary.test")
	second.store.want(t, "clear")
	mustGet(t, second.c, "http://primary.test/", "primary.test")
}

// TestCorruptStore: unreadable records are ignored with a warning.
func TestCorruptStore(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test")
	for name, content := range map[string]string{
		"garbage":        "\x00\xffnot json",
		"unknown domain": `{"version":1,"domain":"elsewhere.test"}` + "\n",
		"wrong version":  `{"version":9,"domain":"dc1.test"}`,
		"empty":          "",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			r := newRig(t, l, path, func(c *Config) { c.Backups = []string{"dc1.test"} })
			r.wantState(t, Primary, "primary.test")
			r.ev.none(t)
			r.store.want(t, "clear") // the bad record is removed at once
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("store file after start: %v, want it removed", err)
			}
			if w := r.logs.warnings(); len(w) != 1 || !hasPrefixAll(w, "failover: ignoring") {
				t.Fatalf("warnings %q, want one about the ignored store", w)
			}
			mustGet(t, r.c, "http://primary.test/", "primary.test")
		})
	}
}

// TestNetworkChanged: in BACKUP, a network change probes primary at once.
func TestNetworkChanged(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test")
	path := filepath.Join(t.TempDir(), "f.json")
	if err := FileStore(path).Save("dc1.test"); err != nil {
		t.Fatal(err)
	}
	// No regular request has gone out yet, so canaries would default to
	// https; the lab serves plain http.
	r := newRig(t, l, path, func(c *Config) { c.Backups = []string{"dc1.test"}; c.CanaryScheme = "http" })
	r.ev.want(t, Primary, Backup, ReasonRestored, "dc1.test")
	r.tr.NetworkChanged()
	r.ev.want(t, Backup, Recovery, ReasonNetworkChanged, "dc1.test")
	r.ev.want(t, Recovery, Primary, ReasonRecoverySuccess, "primary.test")
	r.store.want(t, "clear")
}

// TestConcurrent runs requests from many goroutines while the primary
// flaps, the network changes and timers fire; run it with -race.
func TestConcurrent(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test", "dc2.test")
	r := newRig(t, l, filepath.Join(t.TempDir(), "f.json"), func(c *Config) {
		c.OnTransition = nil
		c.OnCanary = nil
		c.Store = nil
	})
	const workers, each = 8, 100
	var wg sync.WaitGroup
	var bad sync.Map
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				body, err := get(r.c, "http://primary.test/")
				if err == nil && !slices.Contains([]string{"primary.test", "dc1.test", "dc2.test"}, body) {
					bad.Store(fmt.Sprint(w, i), body)
				}
			}
		})
	}
	for i := range 20 {
		switch i % 4 {
		case 0:
			l.down("primary.test")
		case 1:
			r.tr.NetworkChanged()
		case 2:
			l.up("primary.test")
		case 3:
			r.clk.Advance(DefaultRecoveryTimeoutMax)
		}
		_ = r.tr.State()
		_ = r.tr.Domain()
	}
	wg.Wait()
	bad.Range(func(k, v any) bool {
		t.Errorf("request %v answered %q", k, v)
		return true
	})
	var sent float64
	for _, d := range []string{"primary", "backup_1", "backup_2"} {
		sent += counter(t, r.reg, "veer_failover_requests_total", map[string]string{"domain": d})
	}
	if sent != workers*each {
		t.Fatalf("requests counted %v, want %d", sent, workers*each)
	}
}

func TestNewTransportInvalid(t *testing.T) {
	_, err := NewTransport(Config{Primary: "a.test", Backups: []string{"a.test"}, FailureTimeout: -1}, nil)
	var fe *config.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("err %v, want a config.FieldError", err)
	}
	if got := fieldsOf(err); !slices.Equal(got, []string{"backups[0]", "failure_timeout"}) {
		t.Fatalf("fields %q", got)
	}
}

// TestBaselineTransport: the round-robin baseline also drives a Transport.
func TestBaselineTransport(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test", "dc2.test")
	r := newRig(t, l, filepath.Join(t.TempDir(), "f.json"), func(c *Config) { c.Policy = PolicyRoundRobin })
	l.down("primary.test")
	mustFail(t, r.c, "http://primary.test/")
	r.ev.want(t, Primary, Backup, ReasonBaselineSwitch, "dc1.test")
	r.store.want(t, "save dc1.test")
	mustGet(t, r.c, "http://primary.test/", "dc1.test")
	l.down("dc1.test")
	mustFail(t, r.c, "http://primary.test/")
	r.ev.want(t, Backup, Backup, ReasonBaselineSwitch, "dc2.test")
	r.store.want(t, "save dc2.test")
	mustGet(t, r.c, "http://primary.test/", "dc2.test")
}

// TestTLS: over HTTPS with HTTP/2, the TLS server name follows the domain
// the request is rewritten to, and canaries use https like the traffic.
func TestTLS(t *testing.T) {
	l := newLabTLS(t, true, "primary.test", "dc1.test")
	r := newRig(t, l, filepath.Join(t.TempDir(), "f.json"), func(c *Config) { c.Backups = []string{"dc1.test"} })
	mustGet(t, r.c, "https://primary.test/a", "primary.test")
	if got, want := l.server("primary.test").seen(), []seen{{host: "primary.test", path: "/a", sni: "primary.test", proto: 2}}; !slices.Equal(got, want) {
		t.Fatalf("primary saw %+v, want %+v", got, want)
	}
	l.down("primary.test")
	for range 3 {
		mustFail(t, r.c, "https://primary.test/a")
	}
	r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
	r.ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc1.test")
	mustGet(t, r.c, "https://primary.test/b", "dc1.test")
	if got, want := l.server("dc1.test").seen(), []seen{
		{host: "dc1.test", path: DefaultCanaryPath, canary: "1", sni: "dc1.test", proto: 2},
		{host: "dc1.test", path: "/b", sni: "dc1.test", proto: 2},
	}; !slices.Equal(got, want) {
		t.Fatalf("dc1 saw %+v, want %+v", got, want)
	}
}

func TestIsPrimary(t *testing.T) {
	for _, c := range []struct {
		primary, url string
		want         bool
	}{
		{"api.example.com", "https://api.example.com/x", true},
		{"api.example.com", "https://API.Example.com:8443/x", true},
		{"api.example.com", "https://dc1.example.com/x", false},
		{"api.example.com:443", "https://api.example.com/x", true},
		{"api.example.com:443", "http://api.example.com/x", false},
		{"api.example.com:80", "http://api.example.com/x", true},
		{"api.example.com:8443", "https://api.example.com:8443/x", true},
		{"api.example.com:8443", "https://api.example.com:9443/x", false},
		{"[::1]:443", "https://[::1]/x", true},
		{"127.0.0.1:8080", "http://127.0.0.1:8081/", false},
	} {
		tr, err := NewTransport(Config{Primary: c.primary, Backups: []string{"b.test"}, Registerer: prometheus.NewRegistry(), Logger: obs.Discard}, instant{})
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.isPrimary(u); got != c.want {
			t.Errorf("primary %s, url %s: %v, want %v", c.primary, c.url, got, c.want)
		}
		tr.Close()
	}
}
