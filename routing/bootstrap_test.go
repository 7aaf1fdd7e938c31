package routing_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/routing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func key(t testing.TB) (ed25519.PrivateKey, string) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return priv, base64.StdEncoding.EncodeToString(pub)
}

// service is a routing endpoint on a real loopback socket answering a
// signed answer; its handler can be swapped.
func service(t *testing.T, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// signer answers a bound to the requesting device at clk's time (nil:
// the real clock), as veer control does.
func signer(t *testing.T, priv ed25519.PrivateKey, a routing.Answer, got *routing.Request, clk clock.Clock) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req routing.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("decode request: %v", err)
		}
		if got != nil {
			*got = req
		}
		body, err := routing.Sign(a.Bind(req.DeviceID, clock.Or(clk).Now()), priv)
		if err != nil {
			t.Error(err)
		}
		w.Write(body)
	}
}

func TestBootstrapFallbacks(t *testing.T) {
	priv, pub := key(t)
	other, _ := key(t)
	answer := routing.Answer{Primary: "a1.example.com", Backups: []string{"a2.example.com", "b1.example.com"}, TTLSeconds: 600, Rule: "region:east", Version: 7}
	clk := clock.NewManual(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	var logs bytes.Buffer
	opts := routing.Options{Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	cfg := func(url string) routing.Config {
		return routing.Config{URL: url, PublicKeys: []string{pub}, DefaultDomain: "wap.example.com", DefaultBackups: []string{"dc2.example.com"}, StateFile: filepath.Join(dir, "route.json")}
	}
	ok := service(t, signer(t, priv, answer, nil, clk))
	forged := service(t, signer(t, other, routing.Answer{Primary: "evil.example.net", TTLSeconds: 600}, nil, clk))
	failing := service(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	down := closedURL(t)

	steps := []struct {
		name    string
		url     string
		advance time.Duration
		corrupt string
		source  string
		primary string
	}{
		{"service answers", ok.URL, 0, "", routing.SourceService, "a1.example.com"},
		{"service down, persisted within TTL", down, 5 * time.Minute, "", routing.SourcePersisted, "a1.example.com"},
		{"forged signature, persisted", forged.URL, 0, "", routing.SourcePersisted, "a1.example.com"},
		{"503, persisted", failing.URL, 0, "", routing.SourcePersisted, "a1.example.com"},
		{"TTL over: default domain", down, 5*time.Minute + time.Second, "", routing.SourceDefault, "wap.example.com"},
		{"service back", ok.URL, 0, "", routing.SourceService, "a1.example.com"},
		{"corrupt state file: default", down, 0, "{not json", routing.SourceDefault, "wap.example.com"},
	}
	for _, st := range steps {
		clk.Advance(st.advance)
		if st.corrupt != "" {
			if err := os.WriteFile(cfg("").StateFile, []byte(st.corrupt), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		res, err := routing.Bootstrap(context.Background(), cfg(st.url), routing.Request{DeviceID: "d1"}, opts)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if res.Source != st.source || res.Primary != st.primary {
			t.Fatalf("%s: source %s primary %s (err %v), want %s %s", st.name, res.Source, res.Primary, res.Err, st.source, st.primary)
		}
		// Every source leaves the app a failover.Config it can build: a
		// primary and at least one backup.
		wantBackups := answer.Backups
		if st.source == routing.SourceDefault {
			wantBackups = []string{"dc2.example.com"}
		}
		if !slices.Equal(res.Backups, wantBackups) {
			t.Fatalf("%s: backups %v, want %v", st.name, res.Backups, wantBackups)
		}
		if (res.Source == routing.SourceService) != (res.Err == nil) {
			t.Fatalf("%s: Err %v with source %s", st.name, res.Err, res.Source)
		}
	}
	if !strings.Contains(logs.String(), "ignoring the persisted answer") {
		t.Fatalf("no warning about the corrupt state file in:\n%s", logs.String())
	}
}

func TestBootstrapSendsRequestAndDomains(t *testing.T) {
	priv, pub := key(t)
	var got routing.Request
	a := routing.Answer{Primary: "p.example.com", Backups: []string{"b.example.com"}, TTLSeconds: 60, Rule: "default", Version: 1}
	srv := service(t, signer(t, priv, a, &got, nil))
	req := routing.Request{DeviceID: "dev", CustomerID: "cust", App: "bank", AppVersion: "9.1", Platform: "android"}
	res, err := routing.Bootstrap(context.Background(), routing.Config{URL: srv.URL, PublicKeys: []string{pub}, DefaultDomain: "wap.example.com"}, req, routing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got != req {
		t.Fatalf("service saw %+v, want %+v", got, req)
	}
	if d := res.Domains(); len(d) != 2 || d[0] != "p.example.com" || d[1] != "b.example.com" {
		t.Fatalf("Domains() = %v", d)
	}
}

func TestTamperedStateFileIgnored(t *testing.T) {
	priv, pub := key(t)
	a := routing.Answer{Primary: "p.example.com", TTLSeconds: 600, Rule: "default", Version: 1}
	srv := service(t, signer(t, priv, a, nil, nil))
	path := filepath.Join(t.TempDir(), "route.json")
	cfg := routing.Config{URL: srv.URL, PublicKeys: []string{pub}, DefaultDomain: "wap.example.com", StateFile: path}
	if _, err := routing.Bootstrap(context.Background(), cfg, routing.Request{}, routing.Options{}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	tampered := strings.Replace(string(raw), "p.example.com", "x.example.com", 1)
	if tampered == string(raw) {
		t.Fatal("state file does not hold the answer")
	}
	os.WriteFile(path, []byte(tampered), 0o600)
	cfg.URL = closedURL(t)
	res, _ := routing.Bootstrap(context.Background(), cfg, routing.Request{}, routing.Options{Logger: slog.New(slog.DiscardHandler)})
	if res.Source != routing.SourceDefault {
		t.Fatalf("tampered state file used: %+v", res)
	}
}

func TestConfigValidateNamesField(t *testing.T) {
	_, pub := key(t)
	good := routing.Config{URL: "https://wap.example.com/v1/route", PublicKeys: []string{pub}, DefaultDomain: "wap.example.com"}
	cases := map[string]func(*routing.Config){
		"url":            func(c *routing.Config) { c.URL = "wap.example.com" },
		"public_keys":    func(c *routing.Config) { c.PublicKeys = nil },
		"public_keys[0]": func(c *routing.Config) { c.PublicKeys = []string{"short"} },
		"default_domain": func(c *routing.Config) { c.DefaultDomain = "" },
		"timeout":        func(c *routing.Config) { c.Timeout = -1 },
		"default_backups[1]": func(c *routing.Config) {
			c.DefaultBackups = []string{"dc2.example.com", "wap.example.com"}
		},
	}
	for field, mut := range cases {
		c := good
		mut(&c)
		_, err := routing.Bootstrap(context.Background(), c, routing.Request{}, routing.Options{})
		if err == nil || !strings.HasPrefix(err.Error(), field+":") {
			t.Errorf("%s: %v", field, err)
		}
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
}

// closedURL is the URL of a loopback port nobody listens on.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/v1/route"
}

// TestBootstrapAlwaysLeavesABackup: an answer without backups (what a site
// outage produced before control always named one, issue 27) gets the
// configured default backups, never the primary, else the default domain,
// so that failover.NewTransport accepts the Result.
func TestBootstrapAlwaysLeavesABackup(t *testing.T) {
	priv, pub := key(t)
	steps := []struct {
		name     string
		answer   routing.Answer
		defaults []string
		want     []string
	}{
		{"service's backups kept", routing.Answer{Primary: "a1.example.com", Backups: []string{"b1.example.com"}}, []string{"dc2.example.com"}, []string{"b1.example.com"}},
		{"none: default backups", routing.Answer{Primary: "a1.example.com", Backups: []string{}}, []string{"dc2.example.com", "dc3.example.com"}, []string{"dc2.example.com", "dc3.example.com"}},
		{"none: default backups but the primary", routing.Answer{Primary: "dc2.example.com"}, []string{"dc2.example.com", "dc3.example.com"}, []string{"dc3.example.com"}},
		{"primary is the only default backup: the default domain", routing.Answer{Primary: "dc2.example.com"}, []string{"dc2.example.com"}, []string{"wap.example.com"}},
		{"no default backups: the default domain", routing.Answer{Primary: "a1.example.com"}, nil, []string{"wap.example.com"}},
	}
	for _, st := range steps {
		st.answer.TTLSeconds, st.answer.Rule, st.answer.Version = 60, "region:east", 1
		srv := service(t, signer(t, priv, st.answer, nil, nil))
		cfg := routing.Config{URL: srv.URL, PublicKeys: []string{pub}, DefaultDomain: "wap.example.com", DefaultBackups: st.defaults}
		res, err := routing.Bootstrap(context.Background(), cfg, routing.Request{DeviceID: "d1"}, routing.Options{})
		if err != nil || res.Source != routing.SourceService {
			t.Fatalf("%s: %v %s", st.name, err, res.Source)
		}
		if !slices.Equal(res.Backups, st.want) {
			t.Errorf("%s: backups %v, want %v", st.name, res.Backups, st.want)
		}
	}
}
