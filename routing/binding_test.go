package routing_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/routing"
)

// TestBootstrapRefusesOtherDeviceAndExpired walks, on a manual clock, the
// answers Bootstrap must not use: one given to another device, one past
// its expires_at, one without a binding (an older service's, or a captured
// one stripped of it); each falls back with its sentinel in Result.Err,
// and a persisted answer within its TTL still serves while the service is
// down, for its own device only.
func TestBootstrapRefusesOtherDeviceAndExpired(t *testing.T) {
	priv, pub := key(t)
	answer := routing.Answer{Primary: "a1.example.com", Backups: []string{"b1.example.com"}, TTLSeconds: 600, Rule: "region:east", Version: 7}
	clk := clock.NewManual(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	late := clock.NewManual(clk.Now().Add(-time.Hour)) // a service whose answers expired 50 min ago
	dir := t.TempDir()
	opts := routing.Options{Clock: clk, Logger: slog.New(slog.DiscardHandler)}
	cfg := func(url string) routing.Config {
		return routing.Config{URL: url, PublicKeys: []string{pub}, DefaultDomain: "wap.example.com",
			DefaultBackups: []string{"dc2.example.com"}, StateFile: filepath.Join(dir, "route.json")}
	}
	fixed := func(body []byte) string {
		return service(t, func(w http.ResponseWriter, r *http.Request) { w.Write(body) }).URL
	}
	ok := service(t, signer(t, priv, answer, nil, clk)).URL
	otherDevice, _ := routing.Sign(answer.Bind("d2", clk.Now()), priv)
	unbound, _ := routing.Sign(answer, priv)
	expired := service(t, signer(t, priv, answer, nil, late)).URL
	down := closedURL(t)

	steps := []struct {
		name    string
		url     string
		device  string
		advance time.Duration
		source  string
		err     error
	}{
		{"service answers for d1", ok, "d1", 0, routing.SourceService, nil},
		{"answer for another device: persisted", fixed(otherDevice), "d1", 0, routing.SourcePersisted, routing.ErrOtherDevice},
		{"expired answer: persisted", expired, "d1", 0, routing.SourcePersisted, routing.ErrExpired},
		{"unbound answer: persisted", fixed(unbound), "d1", 0, routing.SourcePersisted, routing.ErrUnbound},
		{"service down, within the TTL: persisted", down, "d1", 9 * time.Minute, routing.SourcePersisted, nil},
		{"service down, d1's file on device d2: default", down, "d2", 0, routing.SourceDefault, nil},
		{"service down, TTL over: default", down, "d1", time.Minute, routing.SourceDefault, nil},
	}
	for _, st := range steps {
		clk.Advance(st.advance)
		res, err := routing.Bootstrap(context.Background(), cfg(st.url), routing.Request{DeviceID: st.device}, opts)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if res.Source != st.source || (st.err != nil && !errors.Is(res.Err, st.err)) {
			t.Fatalf("%s: source %s (err %v), want %s (err %v)", st.name, res.Source, res.Err, st.source, st.err)
		}
		if st.source != routing.SourceDefault && (res.Primary != "a1.example.com" || res.DeviceSHA256 != routing.DeviceHash("d1")) {
			t.Fatalf("%s: %+v", st.name, res.Answer)
		}
	}
}

// TestPersistedAnswerBoundedByItsExpiry: the persisted answer's own
// (signed) expires_at bounds it too, whatever the state file says it was
// received at: an edited, later "received" cannot stretch it.
func TestPersistedAnswerBoundedByItsExpiry(t *testing.T) {
	priv, pub := key(t)
	clk := clock.NewManual(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "route.json")
	cfg := routing.Config{URL: service(t, signer(t, priv, routing.Answer{Primary: "p.example.com", TTLSeconds: 600}, nil, clk)).URL,
		PublicKeys: []string{pub}, DefaultDomain: "wap.example.com", StateFile: path}
	opts := routing.Options{Clock: clk, Logger: slog.New(slog.DiscardHandler)}
	if res, _ := routing.Bootstrap(context.Background(), cfg, routing.Request{DeviceID: "d"}, opts); res.Source != routing.SourceService {
		t.Fatalf("first: %+v", res)
	}
	raw, _ := os.ReadFile(path)
	stretched := bytes.Replace(raw, []byte(`"received":"2026-12-01T00:00:00Z"`), []byte(`"received":"2026-12-01T05:00:00Z"`), 1)
	if bytes.Equal(stretched, raw) {
		t.Fatalf("state file: %s", raw)
	}
	os.WriteFile(path, stretched, 0o600)
	cfg.URL = closedURL(t)
	clk.Advance(time.Hour)
	if res, _ := routing.Bootstrap(context.Background(), cfg, routing.Request{DeviceID: "d"}, opts); res.Source != routing.SourceDefault {
		t.Fatalf("an hour after a 10-minute answer: %+v", res)
	}
}

func TestAnswerCheck(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := routing.Answer{Primary: "p.example.com", TTLSeconds: 60}.Bind("dev", now)
	if a.IssuedAt != now.Unix() || a.ExpiresAt != now.Unix()+60 || a.DeviceSHA256 != routing.DeviceHash("dev") {
		t.Fatalf("Bind: %+v", a)
	}
	cases := []struct {
		name   string
		a      routing.Answer
		device string
		at     time.Time
		want   error
	}{
		{"fresh", a, "dev", now, nil},
		{"at expiry, within the skew", a, "dev", now.Add(60*time.Second + routing.MaxClockSkew - time.Second), nil},
		{"past expiry and skew", a, "dev", now.Add(60*time.Second + routing.MaxClockSkew), routing.ErrExpired},
		{"another device", a, "dev2", now, routing.ErrOtherDevice},
		{"no device", a, "", now, routing.ErrOtherDevice},
		{"unbound", routing.Answer{Primary: "p.example.com", TTLSeconds: 60}, "dev", now, routing.ErrUnbound},
	}
	for _, c := range cases {
		if err := c.a.Check(c.device, c.at); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if h := routing.DeviceHash(""); h != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("DeviceHash(\"\") = %s, want SHA-256 of nothing", h)
	}
}

// TestAppendSignedIsSignOfBound: the service's fast path writes exactly the
// bytes Sign writes for the bound answer (plus a newline), for random
// answers, devices and times; every one verifies for its device only.
func TestAppendSignedIsSignOfBound(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	keys := []ed25519.PublicKey{pub}
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", "b-1", "x.example.com", "<&>", "région", `q"uote`, "", "z\\"}
	pick := func() string { return words[rng.IntN(len(words))] }
	for i := range 100 { // two signatures and two verifications each: ~15 ms under -race
		a := routing.Answer{Primary: "p" + strconv.Itoa(i) + ".example.com", TTLSeconds: rng.IntN(routing.MaxTTLSeconds + 1),
			Rule: pick() + pick(), Version: rng.Int64N(1 << 40), Backups: []string{}}
		for range rng.IntN(4) {
			a.Backups = append(a.Backups, "b"+strconv.Itoa(rng.IntN(100))+".example.com")
		}
		device := pick() + strconv.Itoa(rng.IntN(1000))
		now := time.Unix(rng.Int64N(4e9), rng.Int64N(1e9))
		got := routing.Prepare(a).AppendSigned([]byte("prefix"), priv, routing.KeyID(pub), device, now)
		want, err := routing.Sign(a.Bind(device, now), priv)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append([]byte("prefix"), append(want, '\n')...)) {
			t.Fatalf("answer %+v device %q:\n got %s\nwant %s", a, device, got, want)
		}
		v, err := routing.VerifyFor(got[len("prefix"):], keys, device, now)
		if err != nil || !reflect.DeepEqual(v, a.Bind(device, now)) {
			t.Fatalf("VerifyFor: %+v %v, want %+v", v, err, a.Bind(device, now))
		}
		if _, err := routing.VerifyFor(got[len("prefix"):], keys, device+"x", now); !errors.Is(err, routing.ErrOtherDevice) {
			t.Fatalf("another device: %v", err)
		}
	}
}

func BenchmarkAppendSigned(b *testing.B) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	p := routing.Prepare(routing.Answer{Primary: "a1.example.com", Backups: []string{"a2.example.com", "b1.example.com"}, TTLSeconds: 3600, Rule: "region:east", Version: 42})
	id := routing.KeyID(pub)
	buf := make([]byte, 0, 1024)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		buf = p.AppendSigned(buf[:0], priv, id, "device-0123456789", now)
	}
}

// TestUnboundStateFileIgnored: a state file persisted before answers were
// bound (an older app's) is ignored with a warning, like a corrupt one.
func TestUnboundStateFileIgnored(t *testing.T) {
	priv, pub := key(t)
	old, _ := routing.Sign(routing.Answer{Primary: "p.example.com", Backups: []string{"b.example.com"}, TTLSeconds: 600}, priv)
	path := filepath.Join(t.TempDir(), "route.json")
	clk := clock.NewManual(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	os.WriteFile(path, []byte(`{"version":1,"received":"2026-12-01T00:00:00Z","body":`+string(old)+`}`), 0o600)
	var logs bytes.Buffer
	cfg := routing.Config{URL: closedURL(t), PublicKeys: []string{pub}, DefaultDomain: "wap.example.com", StateFile: path}
	res, err := routing.Bootstrap(context.Background(), cfg, routing.Request{DeviceID: "d"}, routing.Options{Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil || res.Source != routing.SourceDefault {
		t.Fatalf("unbound state file: %+v %v", res, err)
	}
	if !bytes.Contains(logs.Bytes(), []byte("ignoring the persisted answer")) || !bytes.Contains(logs.Bytes(), []byte(routing.ErrUnbound.Error())) {
		t.Fatalf("no warning naming the unbound answer:\n%s", logs.String())
	}
}
