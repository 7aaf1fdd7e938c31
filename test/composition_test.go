package test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/failover"
	"github.com/veerhq/veer/gateway"
	"github.com/veerhq/veer/gateway/gatewaytest"
	"github.com/veerhq/veer/lastmile"
	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/routing"
	"github.com/veerhq/veer/tier"
)

// newClient is the README's "Client SDK in one picture", verbatim between
// the markers (TestREADMEPictureIsThisCode holds them equal): the app's
// client, built once per launch, handling every error it can get.
//
// README:begin
func newClient(ctx context.Context, routingCfg routing.Config, privateDNS []string, rootCAs *x509.CertPool, deviceID string) (client *http.Client, primary string, stop func(), err error) {
	lm, err := lastmile.New(lastmile.Config{DNS: lastmile.DNSConfig{
		Order:          []lastmile.ResolverStep{lastmile.StepPrivateUDP, lastmile.StepSystem}, // the private DNS knows the access domains
		PrivateServers: privateDNS,
	}}, lastmile.Options{RootCAs: rootCAs})
	if err != nil {
		return nil, "", nil, err // an invalid lastmile.Config
	}
	// Once per launch: the session's domains, signed. Service down: the last answer within its TTL,
	// else routingCfg's default domain and backups. The answer always carries a backup.
	res, err := routing.Bootstrap(ctx, routingCfg, routing.Request{DeviceID: deviceID}, routing.Options{Client: &http.Client{Transport: lm}})
	if err != nil {
		lm.Close()
		return nil, "", nil, err // an invalid routingCfg
	}
	ft, err := failover.NewTransport(failover.Config{Primary: res.Primary, Backups: res.Backups}, lm)
	if err != nil {
		lm.Close()
		return nil, "", nil, err // no backup: routingCfg names no default_backups and the service none
	}
	stop = func() { ft.Close(); lm.Close() }
	return &http.Client{Transport: &tier.Transport{Next: ft, Self: "rider-app"}}, res.Primary, stop, nil
}

// README:end

// TestREADMEPictureIsThisCode: the README shows newClient as it is here, so
// the picture compiles and is the code these tests run.
func TestREADMEPictureIsThisCode(t *testing.T) {
	src, err := os.ReadFile("composition_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	code := string(src)
	code = code[strings.Index(code, "// README:begin\n")+len("// README:begin\n") : strings.Index(code, "\n// README:end")]
	if !strings.Contains(string(readme), "```go\n"+code+"```\n") {
		t.Fatalf("README.md does not show newClient as test/composition_test.go has it; paste this between ```go and ```:\n%s", code)
	}
}

// system is the whole system on loopback, composed as the docs say: veer
// control (embedded store), the private DNS, a veer gateway per site (site
// a on 127.0.0.2, site b on 127.0.0.3, the same port: the domains differ
// only by address), two backends behind each, and the app's config.
type system struct {
	t          *testing.T
	ctl        *control.Service
	ctlAddrs   control.Addrs
	token      string
	dns        *lmtest.DNSServer
	ca         *lmtest.CA
	port       string
	gw         map[string]*gateway.Gateway
	be         map[string][]*backend
	routingCfg routing.Config
}

// backend answers "<site>" on /ride, 200 on /healthz, 404 elsewhere (no
// /health path: issue 27's backends). frozen, it accepts and never answers,
// as a SIGSTOPped process looks from the gateway; delay adds latency.
type backend struct {
	site   string
	frozen atomic.Bool
	delay  atomic.Int64
	wake   chan struct{} // closed and replaced when unfrozen
	mu     sync.Mutex
	srv    *http.Server
	addr   string
}

func startBackend(t *testing.T, site string) *backend {
	b := &backend{site: site, wake: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	b.srv = &http.Server{Handler: http.HandlerFunc(b.serve), ReadHeaderTimeout: 5 * time.Second}
	go b.srv.Serve(ln)
	t.Cleanup(func() { b.freeze(false); b.srv.Close() })
	return b
}

func (b *backend) serve(w http.ResponseWriter, r *http.Request) {
	if b.frozen.Load() {
		b.mu.Lock()
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-r.Context().Done():
			return
		}
	}
	switch r.URL.Path {
	case "/healthz":
		io.WriteString(w, "ok")
	case "/ride":
		if d := time.Duration(b.delay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, b.site)
	default:
		http.NotFound(w, r)
	}
}

func (b *backend) freeze(on bool) {
	b.frozen.Store(on)
	if !on {
		b.mu.Lock()
		close(b.wake)
		b.wake = make(chan struct{})
		b.mu.Unlock()
	}
}

// gatewayYAML is what an operator writes from docs/gateway.md: routes,
// clusters, backends and a health path; the health interval and the per-try
// timeout are shortened so the test takes seconds.
const gatewayYAML = `
listen: {addr: "ADDR", cert_file: CERT, key_file: KEY, disable_http3: true}
admin: {addr: "127.0.0.1:0"}
data_dir: DATA
routes:
  - {name: app, clusters: [{name: main}], try_timeout: 500ms, timeout: 2s}
clusters:
  - name: main
    backends: [{address: B1}, {address: B2}]
    health: {path: /healthz, interval: 300ms, timeout: 200ms}
EXTRA`

func startSystem(t *testing.T, extraA string) *system {
	t.Helper()
	s := &system{t: t, gw: map[string]*gateway.Gateway{}, be: map[string][]*backend{}}
	dir := t.TempDir()

	var err error
	s.ctl, err = control.New(control.Config{DataDir: filepath.Join(dir, "control"), Listen: "127.0.0.1:0", ListenPlain: "127.0.0.1:0", AdminListen: "127.0.0.1:0"}, control.Options{Logger: obs.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if s.ctlAddrs, err = s.ctl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.ctl.Close() })
	tokenFile, _ := s.ctl.AdminTokenFile()
	raw, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	s.token = strings.TrimSpace(string(raw))
	s.admin("PUT", "/v1/admin/docs/"+control.KeyTable, control.Table{
		DefaultDomain: "wap.veer.test", TTLSeconds: 600,
		Regions: []control.Region{{Name: "loopback", CIDRs: []string{"127.0.0.0/8"}, Site: "a"}},
		Sites: []control.Site{
			{Name: "a", Sibling: "b", Clusters: []control.Cluster{{Name: "a1", Domain: "a1.veer.test"}}},
			{Name: "b", Sibling: "a", Clusters: []control.Cluster{{Name: "b1", Domain: "b1.veer.test"}}},
		},
	})

	a, b := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	if s.dns, err = lmtest.NewDNSServer(map[string][]netip.Addr{"a1.veer.test.": {a}, "b1.veer.test.": {b}, "wap.veer.test.": {b}}, 60); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.dns.Close() })
	if s.ca, err = lmtest.NewCA(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	_, s.port, _ = net.SplitHostPort(ln.Addr().String())
	ln.Close()
	for site, ip := range map[string]netip.Addr{"a": a, "b": b} {
		names := []string{site + "1.veer.test"}
		extra := ""
		if site == "b" {
			names = append(names, "wap.veer.test")
		} else {
			extra = extraA
		}
		s.be[site] = []*backend{startBackend(t, site), startBackend(t, site)}
		cert, key := writeCert(t, s.ca, filepath.Join(dir, site), names)
		yaml := strings.NewReplacer("ADDR", net.JoinHostPort(ip.String(), s.port), "CERT", cert, "KEY", key, "DATA", filepath.Join(dir, site),
			"B1", s.be[site][0].addr, "B2", s.be[site][1].addr, "EXTRA", extra).Replace(gatewayYAML)
		var cfg gateway.Config
		if err := config.Parse([]byte(yaml), site+".yaml", &cfg); err != nil {
			t.Fatal(err)
		}
		s.gw[site] = gatewaytest.Start(t, cfg, gateway.Options{})
	}
	s.routingCfg = routing.Config{
		URL:            "http://" + s.ctlAddrs.Plain + "/v1/route",
		PublicKeys:     []string{control.PublicKeyString(s.ctl.PublicKey())},
		DefaultDomain:  "wap.veer.test",
		DefaultBackups: []string{"a1.veer.test"},
		Timeout:        2 * time.Second,
	}
	return s
}

func writeCert(t *testing.T, ca *lmtest.CA, dir string, names []string) (certFile, keyFile string) {
	t.Helper()
	c, err := ca.Issue(names...)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var certPEM bytes.Buffer
	for _, der := range c.Certificate {
		pem.Encode(&certPEM, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, certPEM.Bytes(), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	return certFile, keyFile
}

// admin calls control's admin API as an operator would.
func (s *system) admin(method, path string, body any) {
	s.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, "http://"+s.ctlAddrs.Admin+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("X-Veer-Reason", "composition test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
	}
	// The write is in the store; answers follow once control has applied
	// it (a route asked before that answered 503 "no routing table yet",
	// and the client took its default domain: a CI failure).
	var w struct{ Revision int64 }
	if err := json.Unmarshal(out, &w); err != nil || w.Revision == 0 {
		s.t.Fatalf("%s %s: no revision in %s (%v)", method, path, out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.ctl.WaitApplied(ctx, w.Revision); err != nil {
		s.t.Fatal(err)
	}
}

// launch builds the README's client for a device and returns a function
// sending one request (a 3 s deadline, as an app would set) that reports
// which site answered, or the error.
func (s *system) launch(device string) (primary string, ride func() (site string, status int, err error)) {
	s.t.Helper()
	c, primary, stop, err := newClient(context.Background(), s.routingCfg, []string{s.dns.Addr()}, s.ca.Pool(), device)
	if err != nil {
		s.t.Fatalf("the README's client for %s: %v", device, err)
	}
	s.t.Cleanup(stop)
	return primary, func() (string, int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+net.JoinHostPort(primary, s.port)+"/ride", nil)
		resp, err := c.Do(req)
		if err != nil {
			return "", 0, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", resp.StatusCode, fmt.Errorf("%d %s: %s", resp.StatusCode, resp.Header.Get(outcome.HeaderOutcome), body)
		}
		return string(body), resp.StatusCode, err
	}
}

// TestREADMEClientThroughSiteOutage: the README's client, as written, at
// launch during a site outage, with every site down and with control down
// (issue 27, defect 1: the first two answered "backups": [], which
// failover.NewTransport refused, and the README's snippet panicked).
func TestREADMEClientThroughSiteOutage(t *testing.T) {
	s := startSystem(t, "")
	steps := []struct {
		name     string
		do       func()
		primary  string
		answered string
	}{
		{"all up: the region's site", nil, "a1.veer.test", "a"},
		{"site a down: the sibling", func() { s.admin("POST", "/v1/admin/playbook", control.Playbook{Action: "site_down", Site: "a"}) }, "b1.veer.test", "b"},
		{"every site down: the default domain", func() { s.admin("POST", "/v1/admin/playbook", control.Playbook{Action: "site_down", Site: "b"}) }, "wap.veer.test", "b"},
		{"control down: routingCfg's defaults", func() { s.ctl.Close() }, "wap.veer.test", "b"},
	}
	for i, st := range steps {
		if st.do != nil {
			st.do()
		}
		primary, ride := s.launch(fmt.Sprint("dev-", i))
		if primary != st.primary {
			t.Fatalf("%s: primary %s, want %s", st.name, primary, st.primary)
		}
		site, _, err := ride()
		if err != nil || site != st.answered {
			t.Fatalf("%s: answered by %q, %v; want site %s", st.name, site, err, st.answered)
		}
	}
}

// TestFrozenBackendsFailOverThroughALiveGateway: both backends of site a
// frozen behind a live gateway; the README's client, with no
// FailureStatuses, reaches site b through its gateway's 504/503 answers
// (Veer-Outcome) and canaries answered by the gateways themselves (the
// backends serve no health path), then stays there (issue 27, defects 2
// and 3: before, it stayed on a's timeouts and 504s while b was healthy).
func TestFrozenBackendsFailOverThroughALiveGateway(t *testing.T) {
	s := startSystem(t, "")
	_, ride := s.launch("dev-frozen")
	if site, _, err := ride(); site != "a" || err != nil {
		t.Fatalf("before the fault: %q %v", site, err)
	}
	for _, b := range s.be["a"] {
		b.freeze(true)
	}
	start := time.Now()
	var failed int
	for {
		site, _, err := ride()
		if site == "b" {
			break
		}
		failed++
		if time.Since(start) > 30*time.Second {
			t.Fatalf("still not on site b %v after both of a's backends froze (%d failed requests, last: %q %v)", time.Since(start), failed, site, err)
		}
	}
	t.Logf("site b answered %v after the freeze, %d requests failed before", time.Since(start).Round(time.Millisecond), failed)
	for i := range 20 {
		if site, _, err := ride(); site != "b" {
			t.Fatalf("request %d after failing over: %q %v", i, site, err)
		}
	}
}

// TestShedGatewayKeepsClients: a gateway that sheds under overload answers
// 503 overloaded; the README's client counts it as the domain answering and
// never moves to the other site (moving clients off an overloaded domain
// overloads the backup).
func TestShedGatewayKeepsClients(t *testing.T) {
	s := startSystem(t, "shed: {enabled: true, limit: {static: 1}, max_queue: 1}\n")
	for _, b := range s.be["a"] {
		b.delay.Store(int64(50 * time.Millisecond))
	}
	_, ride := s.launch("dev-shed")
	var wg sync.WaitGroup
	var mu sync.Mutex
	bySite := map[string]int{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				site, status, err := ride()
				mu.Lock()
				switch {
				case status == http.StatusServiceUnavailable && strings.Contains(fmt.Sprint(err), "overloaded"):
					bySite["shed"]++
				case err != nil:
					bySite["error: "+err.Error()]++
				default:
					bySite[site]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if bySite["shed"] == 0 || bySite["a"] == 0 || len(bySite) != 2 {
		t.Fatalf("answers %v, want only site a's and sheds (503 overloaded), both", bySite)
	}
	if site, _, err := ride(); site != "a" {
		t.Fatalf("after the overload: %q %v, want site a", site, err)
	}
	t.Logf("answers under overload: %v", bySite)
}
