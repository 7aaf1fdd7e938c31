package lastmile

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

var apiRecords = map[string][]netip.Addr{"api.test": addrs("127.0.0.1")}

func TestResolverChain(t *testing.T) {
	e := newDNSEnv(t, map[string][]netip.Addr{"api.test": addrs("127.0.0.1", "::1")})
	type modes struct{ public, private, dohBack lmtest.Mode }
	cases := []struct {
		name      string
		modes     modes
		method    string
		order     []ResolverStep
		bootstrap bool
		want      ResolverStep
		failed    []string
		wantKinds []outcome.Kind
	}{
		{name: "system answers", want: StepSystem},
		{name: "public SERVFAIL -> private UDP", modes: modes{public: lmtest.ServFail}, want: StepPrivateUDP,
			failed: steps(StepSystem), wantKinds: []outcome.Kind{outcome.DNSServerFailure}},
		{name: "public dead -> private UDP", modes: modes{public: lmtest.Silent}, want: StepPrivateUDP,
			failed: steps(StepSystem), wantKinds: []outcome.Kind{outcome.DNSTimeout}},
		{name: "private UDP dropped -> TCP wins the race", modes: modes{public: lmtest.Silent, private: lmtest.DropUDP},
			want: StepPrivateRace, failed: steps(StepSystem, StepPrivateUDP),
			wantKinds: []outcome.Kind{outcome.DNSTimeout, outcome.DNSTimeout}},
		{name: "public hijacked -> private", modes: modes{public: lmtest.Hijack}, want: StepPrivateUDP,
			failed: steps(StepSystem), wantKinds: []outcome.Kind{outcome.DNSServerFailure}},
		{name: "all UDP/TCP DNS dead -> DoH GET", modes: modes{public: lmtest.ServFail, private: lmtest.Refuse},
			want: StepDoH, failed: steps(StepSystem, StepPrivateUDP, StepPrivateRace)},
		{name: "DoH POST", modes: modes{public: lmtest.ServFail, private: lmtest.ServFail}, method: "POST",
			want: StepDoH, failed: steps(StepSystem, StepPrivateUDP, StepPrivateRace)},
		{name: "everything dead -> bootstrap", modes: modes{lmtest.ServFail, lmtest.ServFail, lmtest.ServFail}, bootstrap: true,
			want: StepBootstrap, failed: steps(StepSystem, StepPrivateUDP, StepPrivateRace, StepDoH)},
		{name: "private preferred", order: []ResolverStep{StepPrivateUDP, StepSystem}, want: StepPrivateUDP},
		{name: "NXDOMAIN everywhere is not found", modes: modes{}, order: []ResolverStep{StepSystem}, want: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.public.SetMode(c.modes.public)
			e.private.SetMode(c.modes.private)
			e.dohBack.SetMode(c.modes.dohBack)
			cfg := e.dnsConfig()
			cfg.DoHMethod = c.method
			cfg.Order = c.order
			cfg.Expected = map[string][]string{"test": {"127.0.0.0/8", "::1/128"}}
			if c.bootstrap {
				cfg.Bootstrap = map[string][]string{"api.test": {"127.0.0.1"}}
			}
			r, err := NewResolver(cfg, e.options(t))
			must(t, err)
			tr := &Trace{}
			ctx := WithTrace(context.Background(), tr)
			host := "api.test"
			if c.want == "" {
				host = "missing.test"
			}
			got, step, err := r.Resolve(ctx, host)
			if c.want == "" {
				if outcome.ClassifyError(err) != outcome.DNSNotFound {
					t.Fatalf("err = %v (kind %v), want NXDOMAIN", err, outcome.ClassifyError(err))
				}
				return
			}
			must(t, err)
			if step != c.want || tr.Resolver != c.want {
				t.Fatalf("step = %s (trace %s), want %s; trace %s", step, tr.Resolver, c.want, tr)
			}
			if !got[0].Is4() || !slices.Contains(got, netip.MustParseAddr("127.0.0.1")) {
				t.Fatalf("addrs = %v", got)
			}
			if fs := tr.FailedSteps(); !slices.Equal(fs, c.failed) {
				t.Fatalf("failed steps = %v, want %v (%s)", fs, c.failed, tr)
			}
			for i, k := range c.wantKinds {
				if tr.Failures[i].Kind != k {
					t.Errorf("failure %d kind = %v, want %v (%v)", i, tr.Failures[i].Kind, k, tr.Failures[i].Err)
				}
			}
			if c.modes.public == lmtest.Hijack && !errors.Is(tr.Failures[0].Err, ErrHijacked) {
				t.Errorf("hijack failure = %v, want ErrHijacked", tr.Failures[0].Err)
			}
		})
	}
}

func TestResolverCacheAndServeStale(t *testing.T) {
	e := newDNSEnv(t, apiRecords)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := e.dnsConfig()
	cfg.Order = []ResolverStep{StepSystem, StepPrivateUDP}
	cfg.MaxStale = time.Hour
	cfg.DeadServerHold = -1 // each row asks every server (TestResolverDeadServer covers the memory)
	cfg.MinTTL = time.Second
	cfg.SystemTTL = 300 * time.Second
	cfg.CacheFile = filepath.Join(t.TempDir(), "dns.json")
	opts := e.options(t)
	opts.Clock = clk
	r, err := NewResolver(cfg, opts)
	must(t, err)
	t.Cleanup(r.Flush)
	ctx := context.Background()
	dead := func() { e.public.SetMode(lmtest.Silent); e.private.SetMode(lmtest.ServFail) }

	// Step table: (advance, DNS alive, expected step or "" for failure).
	steps := []struct {
		advance time.Duration
		alive   bool
		want    ResolverStep
	}{
		{0, true, StepSystem},
		{time.Second, true, StepCache},        // TTL 300 s: fresh, no query
		{299 * time.Second, false, StepStale}, // just expired, DNS dead: stale
		{59 * time.Minute, false, StepStale},  // 59 min past TTL: still within MaxStale
		{2 * time.Minute, false, ""},          // 61 min past TTL: too stale
		{0, true, StepSystem},                 // DNS back: fresh answer again
		{0, false, StepCache},                 // and cached
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		if s.alive {
			e.public.SetMode(lmtest.Answer)
			e.private.SetMode(lmtest.Answer)
		} else {
			dead()
		}
		before := e.public.Queries()
		_, step, err := r.Resolve(ctx, "api.test")
		switch {
		case s.want == "" && err == nil:
			t.Fatalf("step %d: got %s, want failure", i, step)
		case s.want != "" && (err != nil || step != s.want):
			t.Fatalf("step %d: got %s, %v; want %s", i, step, err, s.want)
		}
		if s.want == StepCache && e.public.Queries() != before {
			t.Fatalf("step %d: cache hit sent %d queries", i, e.public.Queries()-before)
		}
	}
}

func TestResolverColdStartFromPersistedCache(t *testing.T) {
	e := newDNSEnv(t, apiRecords)
	path := filepath.Join(t.TempDir(), "dns.json")
	cfg := e.dnsConfig()
	cfg.CacheFile = path
	r1, err := NewResolver(cfg, e.options(t))
	must(t, err)
	_, _, err = r1.Resolve(context.Background(), "api.test")
	must(t, err)
	must(t, r1.Close()) // the process exits: the cache is on disk

	// A new process, one hour later (past the 300 s TTL), every DNS dead.
	e.public.SetMode(lmtest.Silent)
	e.private.SetMode(lmtest.Silent)
	e.dohBack.SetMode(lmtest.ServFail)
	opts := e.options(t)
	opts.Clock = clock.NewManual(time.Now().Add(time.Hour))
	r2, err := NewResolver(cfg, opts)
	must(t, err)
	t.Cleanup(r2.Flush)
	got, step, err := r2.Resolve(context.Background(), "api.test")
	must(t, err)
	if step != StepStale || got[0] != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("got %v via %s, want 127.0.0.1 via stale", got, step)
	}
}

func TestResolverCorruptCacheFileIgnored(t *testing.T) {
	e := newDNSEnv(t, apiRecords)
	path := filepath.Join(t.TempDir(), "dns.json")
	must(t, os.WriteFile(path, []byte(`{"version":1,"entries":[{"name":"api.test.","addrs":["not-an-ip"]}]`), 0o600))
	var logs bytes.Buffer
	cfg := e.dnsConfig()
	cfg.CacheFile = path
	opts := e.options(t)
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	r, err := NewResolver(cfg, opts)
	must(t, err)
	if !bytes.Contains(logs.Bytes(), []byte("corrupt")) {
		t.Fatalf("no warning logged: %q", logs.String())
	}
	_, step, err := r.Resolve(context.Background(), "api.test")
	must(t, err)
	if step != StepSystem {
		t.Fatalf("step = %s, want system", step)
	}
	// The file was rewritten atomically and parses now.
	r.Flush()
	data, err := os.ReadFile(path)
	must(t, err)
	if _, err := parseCacheFile(data); err != nil {
		t.Fatalf("rewritten cache file: %v", err)
	}
}

func TestResolverMetricsLint(t *testing.T) {
	e := newDNSEnv(t, apiRecords)
	reg := prometheus.NewRegistry()
	opts := e.options(t)
	opts.Registerer = reg
	e.public.SetMode(lmtest.ServFail)
	r, err := NewResolver(e.dnsConfig(), opts)
	must(t, err)
	_, _, err = r.Resolve(context.Background(), "api.test")
	must(t, err)
	for _, err := range obs.Lint(reg) {
		t.Error(err)
	}
	if got := testutilCount(t, reg, "veer_lastmile_step_failures_total", map[string]string{"step": "system", "kind": "dns_server_failure"}); got != 1 {
		t.Fatalf("system failures = %v, want 1", got)
	}
}
