// Command lastmilebench runs the last-mile access-success experiment of
// docs/lastmile.md over real sockets on loopback: DNS servers, access nodes
// (HTTP/3 + HTTP/2), a scheduler, a CDN node and a load balancer, with
// faults drawn per attempt at a documented mix. Each attempt is a cold app
// launch that compares plain access (system DNS, one domain, TCP) with the
// lastmile chain (which keeps its DNS cache file across launches, 10 minutes
// apart in the cache's clock).
//
//	go run ./cmd/lastmilebench -n 1000 -mix default
//	go run ./cmd/lastmilebench -n 300 -mix none   # overhead when nothing fails
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/lastmile"
	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/obs"
)

// fault is one independent fault and its per-attempt probability.
type fault struct {
	name string
	p    float64
}

// mixes are the documented fault mixes.
var mixes = map[string][]fault{
	"default": {
		{"dns_dead", 0.02},    // public resolver silent (half) or SERVFAIL (half)
		{"dns_hijack", 0.01},  // public resolver answers 127.0.0.2 (nothing there)
		{"udp_blocked", 0.05}, // QUIC dropped on every node, private DNS UDP dropped
		{"node_down", 0.02},   // the domain's node and both scheduled nodes down
		{"sched_down", 0.02},  // scheduler answers 503
		{"cdn_down", 0.01},    // the CDN node down
		{"all_down", 0.005},   // every node, CDN and LB down (the network is gone)
	},
	"none": {},
}

type world struct {
	ca                      *lmtest.CA
	public, private, dohDNS *lmtest.DNSServer
	doh                     *lmtest.DoHServer
	main, second, cdn, lb   *lmtest.Node
	schedNode               *lmtest.Node
	sched                   *lmtest.Scheduler
	all                     []*lmtest.Node
}

var names = []string{"api.example", "sched.example", "cdn.example"}

func build() (*world, error) {
	w := &world{}
	var err error
	if w.ca, err = lmtest.NewCA(); err != nil {
		return nil, err
	}
	recs := map[string][]netip.Addr{}
	for _, n := range names {
		recs[n] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}
	for _, p := range []**lmtest.DNSServer{&w.public, &w.private, &w.dohDNS} {
		if *p, err = lmtest.NewDNSServer(recs, 300); err != nil {
			return nil, err
		}
	}
	w.public.SetHijack(netip.MustParseAddr("127.0.0.2"))
	if w.doh, err = lmtest.NewDoHServer(w.ca, w.dohDNS.Addr()); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		n    **lmtest.Node
		name string
	}{{&w.main, "main"}, {&w.second, "second"}, {&w.cdn, "cdn"}, {&w.lb, "lb"}} {
		if *p.n, err = lmtest.NewNode(p.name, w.ca, lmtest.NodeOptions{Names: names}); err != nil {
			return nil, err
		}
		w.all = append(w.all, *p.n)
	}
	w.sched = lmtest.NewScheduler(300, lmtest.AccessNode{Addr: w.main.Addr()}, lmtest.AccessNode{Addr: w.second.Addr()})
	if w.schedNode, err = lmtest.NewNode("sched", w.ca, lmtest.NodeOptions{Names: names, Handler: w.sched}); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *world) close() {
	for _, n := range append(w.all, w.schedNode) {
		n.Close()
	}
	w.doh.Close()
	w.public.Close()
	w.private.Close()
	w.dohDNS.Close()
}

// apply sets the faults of one attempt (and clears the others).
func (w *world) apply(on map[string]bool, rng *rand.Rand) {
	w.public.SetMode(lmtest.Answer)
	w.private.SetMode(lmtest.Answer)
	switch {
	case on["dns_dead"] && rng.IntN(2) == 0:
		w.public.SetMode(lmtest.Silent)
	case on["dns_dead"]:
		w.public.SetMode(lmtest.ServFail)
	case on["dns_hijack"]:
		w.public.SetMode(lmtest.Hijack)
	}
	if on["udp_blocked"] {
		w.private.SetMode(lmtest.DropUDP)
	}
	w.sched.SetDown(on["sched_down"])
	for _, n := range append(w.all, w.schedNode) {
		n.BlockQUIC(on["udp_blocked"] || on["all_down"])
		n.BlockTCP(on["all_down"])
	}
	if on["node_down"] {
		for _, n := range []*lmtest.Node{w.main, w.second} {
			n.BlockQUIC(true)
			n.BlockTCP(true)
		}
	}
	if on["cdn_down"] {
		w.cdn.BlockQUIC(true)
		w.cdn.BlockTCP(true)
	}
}

// shifted is the wall clock moved by an offset: real timers, shifted Now, so
// each attempt's cold start happens "later" for the DNS cache's TTLs.
type shifted struct {
	clock.Clock
	off time.Duration
}

func (s shifted) Now() time.Time                  { return time.Now().Add(s.off) }
func (s shifted) Since(t time.Time) time.Duration { return s.Now().Sub(t) }

func port(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

type result struct {
	ok   bool
	ttfb time.Duration
}

func attempt(rt http.RoundTripper, url string, timeout time.Duration, tr *lastmile.Trace) result {
	ctx, cancel := context.WithTimeout(lastmile.WithTrace(context.Background(), tr), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	start := time.Now()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return result{}
	}
	ttfb := time.Since(start)
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return result{ok: err == nil && resp.StatusCode == http.StatusOK, ttfb: ttfb}
}

func main() {
	n := flag.Int("n", 1000, "attempts")
	mixName := flag.String("mix", "default", "fault mix: default or none")
	seed := flag.Uint64("seed", 1, "random seed")
	timeout := flag.Duration("timeout", 3*time.Second, "deadline of one attempt")
	slow := flag.Duration("slow", time.Second, "with -v, also print chain attempts slower than this")
	verbose := flag.Bool("v", false, "print the Trace of every failed chain attempt to stderr")
	noCache := flag.Bool("no-cache-file", false, "do not persist the chain's DNS cache (every launch starts cold)")
	noH3 := flag.Bool("disable-h3", false, "chain over TCP only (isolates the chain's cost from QUIC's)")
	assumeH3 := flag.Bool("assume-h3", true, "race QUIC from the first contact (race.assume_h3; the bench's nodes serve HTTP/3 without advertising it)")
	steps := flag.String("steps", "", "route steps of the chain, comma-separated (default: scheduler,direct,cdn,fallback_ip)")
	flag.Parse()
	mix, ok := mixes[*mixName]
	if !ok {
		fmt.Fprintln(os.Stderr, "unknown mix", *mixName)
		os.Exit(2)
	}
	w, err := build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer w.close()
	dir, err := os.MkdirTemp("", "lastmilebench")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)

	url := "https://api.example:" + strconv.Itoa(port(w.main.Addr())) + "/"
	expected := map[string][]string{}
	for _, nm := range names {
		expected[nm] = []string{"127.0.0.1/32"}
	}
	cfg := lastmile.Config{
		DNS: lastmile.DNSConfig{
			PrivateServers: []string{w.private.Addr()},
			DoHURL:         w.doh.URL(),
			Timeout:        300 * time.Millisecond,
			Expected:       expected,
			CacheFile:      filepath.Join(dir, "dns.json"),
		},
		Scheduler:   lastmile.SchedulerConfig{URL: "https://sched.example:" + strconv.Itoa(port(w.schedNode.Addr())) + "/v1/schedule", Timeout: time.Second},
		CDN:         []lastmile.CDNDomain{{Domain: "cdn.example", Port: port(w.cdn.Addr())}},
		FallbackIPs: []lastmile.FallbackIP{{Addr: w.lb.Addr(), ServerName: "api.example"}},
		Race:        lastmile.RaceConfig{ConnectTimeout: 500 * time.Millisecond},
	}
	cfg.Race.DisableH3 = *noH3
	cfg.Race.AssumeH3 = *assumeH3
	if *noCache {
		cfg.DNS.CacheFile = ""
	}
	if *steps != "" {
		for _, s := range strings.Split(*steps, ",") {
			cfg.Steps = append(cfg.Steps, lastmile.RouteStep(s))
		}
	}
	reg := prometheus.NewRegistry()
	rng := rand.New(rand.NewPCG(*seed, 0))
	var plain, chain []result
	faultCount := map[string]int{}
	for i := range *n {
		on := map[string]bool{}
		for _, f := range mix {
			if rng.Float64() < f.p {
				on[f.name] = true
				faultCount[f.name]++
			}
		}
		w.apply(on, rng)
		pt := &http.Transport{
			DialContext:       (&net.Dialer{Resolver: w.public.Resolver()}).DialContext,
			TLSClientConfig:   lmtestTLS(w.ca),
			ForceAttemptHTTP2: true,
		}
		opts := lastmile.Options{
			Clock:          shifted{clock.Real, time.Duration(i) * 10 * time.Minute},
			SystemResolver: w.public.Resolver(),
			RootCAs:        w.ca.Pool(),
			Registerer:     reg,
			Logger:         obs.Discard,
			DoHClient:      &http.Client{Transport: &http.Transport{TLSClientConfig: lmtestTLS(w.ca), ForceAttemptHTTP2: true}},
		}
		lt, err := lastmile.New(cfg, opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		// Alternate who goes first (A B, B A) so neither always meets a
		// warm server.
		tr := &lastmile.Trace{}
		if i%2 == 0 {
			plain = append(plain, attempt(pt, url, *timeout, nil))
			chain = append(chain, attempt(lt, url, *timeout, tr))
		} else {
			chain = append(chain, attempt(lt, url, *timeout, tr))
			plain = append(plain, attempt(pt, url, *timeout, nil))
		}
		if c := chain[len(chain)-1]; *verbose && (!c.ok || c.ttfb > *slow) {
			fmt.Fprintf(os.Stderr, "attempt %d faults %v: chain ok=%v ttfb=%v: %s\n", i, on, c.ok, c.ttfb, tr)
		}
		pt.CloseIdleConnections()
		lt.Close()
		opts.DoHClient.CloseIdleConnections()
	}
	fmt.Printf("attempts: %d, mix %q, seed %d, steps %v, disable-h3 %v\n\n", *n, *mixName, *seed, stepsOr(cfg.Steps), *noH3)
	fmt.Println("| fault | p | attempts hit |")
	fmt.Println("|---|---|---|")
	for _, f := range mix {
		fmt.Printf("| %s | %.3f | %d |\n", f.name, f.p, faultCount[f.name])
	}
	fmt.Println()
	fmt.Println("| access | success | TTFB median | TTFB p99 |")
	fmt.Println("|---|---|---|---|")
	report("plain (system DNS, one domain, TCP)", plain)
	report("lastmile chain", chain)
	fmt.Println()
	printCounters(reg, "veer_lastmile_served_total")
	printCounters(reg, "veer_lastmile_dns_answers_total")
	printCounters(reg, "veer_lastmile_race_wins_total")
}

func report(name string, rs []result) {
	var ok int
	var t []time.Duration
	for _, r := range rs {
		if r.ok {
			ok++
			t = append(t, r.ttfb)
		}
	}
	slices.Sort(t)
	q := func(p float64) time.Duration {
		if len(t) == 0 {
			return 0
		}
		return t[min(len(t)-1, int(p*float64(len(t))))]
	}
	fmt.Printf("| %s | %.2f%% (%d/%d) | %v | %v |\n", name, 100*float64(ok)/float64(len(rs)), ok, len(rs),
		q(0.5).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond))
}

func printCounters(g prometheus.Gatherer, name string) {
	mfs, _ := g.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var parts []string
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetValue())
			}
			parts = append(parts, fmt.Sprintf("%s=%.0f", strings.Join(ls, "/"), m.GetCounter().GetValue()))
		}
		slices.Sort(parts)
		fmt.Printf("%s: %s\n", name, strings.Join(parts, " "))
	}
}

func (c cfgSteps) String() string { return fmt.Sprint([]lastmile.RouteStep(c)) }

type cfgSteps []lastmile.RouteStep

func stepsOr(s []lastmile.RouteStep) cfgSteps {
	if len(s) == 0 {
		return cfgSteps{lastmile.StepScheduler, lastmile.StepDirect, lastmile.StepCDN, lastmile.StepFallbackIP}
	}
	return s
}
