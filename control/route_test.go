package control_test

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/routing"
)

// TestBootstrapEndToEnd drives routing.Bootstrap against a real control
// instance over HTTP/1.1, HTTP/2 and HTTP/3, then with the service down.
func TestBootstrapEndToEnd(t *testing.T) {
	e := start(t, control.Config{}, control.Options{})
	e.waitVersion(e.put(control.KeyTable, table()))
	pub := control.PublicKeyString(e.svc.PublicKey())
	state := filepath.Join(t.TempDir(), "route.json")
	clk := clock.NewManual(time.Now())
	h1 := &http.Client{Transport: &http.Transport{}}
	h2t := &http.Transport{TLSClientConfig: insecureTLS(), ForceAttemptHTTP2: true}
	h2 := &http.Client{Transport: h2t}
	h3t := &http3.Transport{TLSClientConfig: insecureTLS()}
	h3 := &http.Client{Transport: h3t}
	defer h1.CloseIdleConnections()
	defer h2.CloseIdleConnections()
	defer h3t.Close()
	cases := []struct {
		proto  string
		url    string
		client *http.Client
	}{
		{"HTTP/1.1", "http://" + e.addrs.Plain + "/v1/route", h1},
		{"HTTP/2.0", "https://" + e.addrs.Public + "/v1/route", h2},
		{"HTTP/3.0", "https://" + e.addrs.Public + "/v1/route", h3},
	}
	cfg := routing.Config{PublicKeys: []string{pub}, DefaultDomain: "wap.example.com", StateFile: state}
	for _, c := range cases {
		cfg.URL = c.url
		res, err := routing.Bootstrap(context.Background(), cfg, routing.Request{DeviceID: "vip-1", App: "bank"}, routing.Options{Client: c.client, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != routing.SourceService || res.Primary != "b1.example.com" || res.Rule != "whitelist:vip" {
			t.Fatalf("%s: %+v", c.proto, res)
		}
		// The protocol really is the one named.
		req, _ := http.NewRequest("GET", c.url[:len(c.url)-len("/v1/route")]+"/healthz", nil)
		r, err := c.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.Proto != c.proto {
			t.Fatalf("served over %s, want %s", r.Proto, c.proto)
		}
	}
	// The service goes down: the persisted answer serves within its TTL,
	// then the default domain.
	e.svc.Close()
	cfg.URL = cases[0].url
	quiet := routing.Options{Client: h1, Clock: clk, Logger: slog.New(slog.DiscardHandler)}
	res, _ := routing.Bootstrap(context.Background(), cfg, routing.Request{DeviceID: "vip-1"}, quiet)
	if res.Source != routing.SourcePersisted || res.Primary != "b1.example.com" || res.Err == nil {
		t.Fatalf("service down, within TTL: %+v", res)
	}
	// The answer is bound to vip-1: the same state file on another device
	// is refused.
	if res, _ := routing.Bootstrap(context.Background(), cfg, routing.Request{DeviceID: "vip-2"}, quiet); res.Source != routing.SourceDefault {
		t.Fatalf("vip-1's persisted answer served vip-2: %+v", res)
	}
	clk.Advance(601 * time.Second)
	res, _ = routing.Bootstrap(context.Background(), cfg, routing.Request{DeviceID: "vip-1"}, quiet)
	if res.Source != routing.SourceDefault || res.Primary != "wap.example.com" {
		t.Fatalf("service down, TTL over: %+v", res)
	}
}

func TestRouteAnswersAndErrors(t *testing.T) {
	e := start(t, control.Config{}, control.Options{})
	url := "http://" + e.addrs.Plain + "/v1/route"
	post := func(body string) (int, string) {
		r, err := http.Post(url, "application/json", stringsReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b := readAll(r)
		return r.StatusCode, b
	}
	if code, _ := post(`{"device_id":"d"}`); code != http.StatusServiceUnavailable {
		t.Fatalf("before any table: %d, want 503", code)
	}
	e.waitVersion(e.put(control.KeyTable, table()))
	for _, c := range []struct {
		body string
		code int
	}{
		{`{"device_id":"d1","app":"bank","platform":"ios","future_field":1}`, 200},
		{`{"customer_id":"c1"}`, 200},
		{`{}`, 400},
		{`{"device_id":`, 400},
		{`{"device_id":"` + string(make([]byte, 300)) + `"}`, 400},
		{`{"device_id":"` + repeat("x", 70<<10) + `"}`, 413},
	} {
		code, body := post(c.body)
		if code != c.code {
			t.Fatalf("%.40q: %d %s, want %d", c.body, code, body, c.code)
		}
		if code == 200 {
			a, err := routing.Verify([]byte(body), []ed25519.PublicKey{e.svc.PublicKey()})
			if err != nil || a.Rule != "region:local" || a.TTLSeconds != 600 {
				t.Fatalf("answer %+v %v", a, err)
			}
			var req routing.Request
			json.Unmarshal([]byte(c.body), &req)
			if a.DeviceSHA256 != routing.DeviceHash(req.Subject()) || a.Check(req.Subject(), time.Now()) != nil {
				t.Fatalf("%.40q: bound to %s, want the hash of %q", c.body, a.DeviceSHA256, req.Subject())
			}
			if req.DeviceID == "" { // a customer's answer serves no other customer and no device-less request
				for _, other := range []string{"customer:c2", ""} {
					if !errors.Is(a.Check(other, time.Now()), routing.ErrOtherDevice) {
						t.Fatalf("customer c1's answer accepted for %q", other)
					}
				}
			}
		}
	}
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /v1/route: %d", r.StatusCode)
	}
}

var _ = tls.VersionTLS13
