package up

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/internal/localca"
	"github.com/veerhq/veer/routing"
)

// retireRig is the part of a veer up that devices talk to, real and in
// this process: a TLS server over HTTP/2 standing in for the gateway and
// the routing service (signed answers for site a), and the public
// resolver, which also serves as the private DNS. Each app request the
// server answers is sent on served.
type retireRig struct {
	env    *deviceEnv
	served chan struct{}
}

func newRetireRig(t *testing.T) *retireRig {
	t.Helper()
	zone := DefaultZone
	dom := func(n string) string { return n + "." + zone }
	ca, err := localca.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue([]string{dom("a"), dom("b"), dom("wap"), dom("route")})
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	answer := routing.Prepare(routing.Answer{Primary: dom("a"), Backups: []string{dom("b")}, TTLSeconds: 600, Rule: "retire-test", Version: 1})
	rig := &retireRig{served: make(chan struct{}, 1<<16)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/route", func(w http.ResponseWriter, r *http.Request) {
		var req routing.Request
		if err := json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write(answer.AppendSigned(nil, priv, routing.KeyID(pub), req.Subject(), time.Now()))
	})
	mux.HandleFunc("/api/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(HeaderCluster, "a1")
		_, _ = io.WriteString(w, "ok")
		select {
		case rig.served <- struct{}{}:
		default:
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}} // ServeTLS adds h2
	go func() { _ = hs.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = hs.Close() })
	records := map[string][]string{}
	for _, n := range []string{"a", "b", "wap", "route"} {
		records[dom(n)+"."] = []string{"127.0.0.1"}
	}
	pdns, err := startPublicDNS(records)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pdns.close)
	cfg := Config{Rate: 20}.withDefaults()
	port := ln.Addr().(*net.TCPAddr).Port
	rig.env = &deviceEnv{cfg: cfg, roots: ca.Pool(), dnsAddr: pdns.addr, publicDNS: pdns.addr, gwPort: port,
		routeURL:  "https://" + dom("route") + ":" + strconv.Itoa(port) + "/v1/route",
		publicKey: control.PublicKeyString(pub), defaultDom: dom("wap"), defaultBk: []string{dom("b")},
		sites:    map[string]string{dom("a"): "a", dom("b"): "b", dom("wap"): "wap"},
		stateDir: t.TempDir(), reg: prometheus.NewRegistry(), log: slog.New(slog.DiscardHandler), stats: newStats()}
	return rig
}

// A System running only its population (no children): what AddDevices and
// RetireDevices touch. The initial population is one device that does not
// run (its ID is not AddDevices'), as Start's devices would be.
func (rig *retireRig) system(t *testing.T) *System {
	s := &System{cfg: rig.env.cfg, env: rig.env, stats: rig.env.stats, log: rig.env.log}
	s.runCtx, s.cancel = context.WithCancel(context.Background())
	s.devices = []*device{{id: "dev-0000", group: "a"}}
	s.nextDev = 1
	t.Cleanup(func() {
		s.cancel()
		s.wg.Wait()
		for _, d := range s.devs() {
			if d.path != nil {
				d.close()
			}
		}
	})
	return s
}

// Devices launched by AddDevices and then retired leave nothing behind:
// the population is back to its size (Stats too), every device's loop has
// returned (its done channel is closed), its routing state file is gone,
// and no goroutine it started remains (goleak against the goroutines of
// before the launch: its connections, relays, failover timers). Unknown
// IDs, repeated ones and the initial population are refused with 404 and
// retire nothing.
func TestRetireDevicesLeavesNothing(t *testing.T) {
	rig := newRetireRig(t)
	s := rig.system(t)
	before := goleak.IgnoreCurrent()
	base := runtime.NumGoroutine()

	const n = 4
	out, err := s.AddDevices(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(out))
	for i, d := range out {
		ids[i] = d.ID
		if d.Source != routing.SourceService || d.Site != "a" {
			t.Fatalf("%s: source %q site %q, want the service's answer for site a", d.ID, d.Source, d.Site)
		}
		if _, err := os.Stat(filepath.Join(rig.env.stateDir, d.ID+".route.json")); err != nil {
			t.Fatalf("%s: no routing state file: %v", d.ID, err)
		}
	}
	if got := s.Stats().Devices; got != 1+n {
		t.Fatalf("Stats().Devices = %d after adding %d to 1", got, n)
	}
	// every device has traffic on its connections before it is retired
	for range 5 * n {
		select {
		case <-rig.served:
		case <-t.Context().Done():
			t.Fatal("no traffic from the new devices")
		}
	}
	running := runtime.NumGoroutine()
	s.devMu.Lock()
	var ls []*launched
	for _, id := range ids {
		ls = append(ls, s.added[id])
	}
	s.devMu.Unlock()

	del := func(q string) int {
		w := httptest.NewRecorder()
		s.handleRetireDevices(w, httptest.NewRequestWithContext(t.Context(), http.MethodDelete, "/v1/devices?ids="+q, nil))
		return w.Code
	}
	// refused as a whole: one unknown, a repeat, the initial population
	for _, q := range []string{ids[0] + ",dev-9999", ids[0] + "," + ids[0], "dev-0000", ids[1] + ",dev-0000"} {
		if code := del(q); code != http.StatusNotFound {
			t.Fatalf("DELETE ids=%s: %d, want 404", q, code)
		}
	}
	if got := len(s.devs()); got != 1+n {
		t.Fatalf("a refused DELETE retired devices: %d left of %d", got, 1+n)
	}

	if code := del(strings.Join(ids, ",")); code != http.StatusNoContent {
		t.Fatalf("DELETE ids=%s: %d, want 204", strings.Join(ids, ","), code)
	}
	for i, l := range ls {
		select {
		case <-l.done:
		default:
			t.Fatalf("%s: its loop still runs after DELETE returned", ids[i])
		}
		if _, err := os.Stat(filepath.Join(rig.env.stateDir, ids[i]+".route.json")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: routing state file left: %v", ids[i], err)
		}
	}
	devs := s.devs()
	if len(devs) != 1 || devs[0].id != "dev-0000" {
		t.Fatalf("population after retiring: %d devices, want the initial one", len(devs))
	}
	snap := s.Stats()
	states := 0
	for _, v := range snap.States {
		states += v
	}
	if snap.Devices != 1 || states != 1 {
		t.Fatalf("Stats after retiring: %d devices, %d in states %v; want 1", snap.Devices, states, snap.States)
	}
	s.devMu.Lock()
	left := len(s.added)
	s.devMu.Unlock()
	if left != 0 {
		t.Fatalf("%d launched devices still registered", left)
	}
	if code := del(ids[0]); code != http.StatusNotFound {
		t.Fatalf("DELETE of a retired device: %d, want 404", code)
	}
	// the goroutines: what the devices started is gone (goleak retries
	// while the server's side of their connections winds down)
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after retiring %d devices (%d before, %d running): %v", n, base, running, err)
	}
	t.Logf("goroutines: %d before, %d with %d devices running, %d after retiring them", base, running, n, runtime.NumGoroutine())
}

// RetireDevices on a system that launched nothing refuses, and bad lists
// are 400s.
func TestRetireDevicesBadInput(t *testing.T) {
	s := &System{}
	for q, want := range map[string]int{"": 400, ",": 400, "dev-1,,dev-2": 400, "dev%201": 400, strings.Repeat("x", 65): 400,
		strings.Repeat("d,", MaxRetire) + "d": 400, "dev-0001": 404, "dev-0001,dev-0002": 404} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodDelete, "/v1/devices", nil)
		r.URL.RawQuery = "ids=" + q
		s.handleRetireDevices(w, r)
		if w.Code != want {
			t.Errorf("ids=%q: %d, want %d", q, w.Code, want)
		}
	}
}

// The ids parser: any query gives a list of valid IDs (1..MaxRetire) or
// an error, and the handler answers 400 or 404 on a system that launched
// nothing.
func FuzzRetireIDs(f *testing.F) {
	for _, q := range []string{"dev-0050", "dev-0050,dev-0051", "", ",", "a,,b", "é", strings.Repeat("a,", 300)} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		ids, err := parseIDs(q)
		if err == nil {
			if len(ids) == 0 || len(ids) > MaxRetire {
				t.Fatalf("%q: %d ids", q, len(ids))
			}
			for _, id := range ids {
				if id == "" || len(id) > 64 || strings.ContainsAny(id, ", \x00") {
					t.Fatalf("%q: id %q accepted", q, id)
				}
			}
		}
		s := &System{}
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodDelete, "/v1/devices", nil)
		r.URL.RawQuery = "ids=" + strings.ReplaceAll(q, "&", "%26")
		s.handleRetireDevices(w, r)
		if w.Code != http.StatusBadRequest && w.Code != http.StatusNotFound {
			t.Fatalf("%q: status %d", q, w.Code)
		}
	})
}
