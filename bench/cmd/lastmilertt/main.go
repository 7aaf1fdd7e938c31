// Command lastmilertt measures what QUIC saves over real round trips: the
// time to first byte of a cold start (new transport, DNS, connection,
// first request) and of a request on the warm connection, for plain
// http.Transport (TCP, TLS 1.3, HTTP/2), the lastmile chain over TCP only,
// and the lastmile chain racing HTTP/3 (race.assume_h3, tcp_delay 250 ms),
// through internal/netem at each RTT × loss cell. Contenders alternate
// (rotated order per round); rounds run on -workers goroutines.
//
//	go run ./cmd/lastmilertt -n 40 -rtt 50ms,150ms,300ms -loss 0,0.01,0.05
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/veerhq/veer/internal/netem"
	"github.com/veerhq/veer/lastmile"
	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/obs"
)

// cell is one emulated path with its servers.
type cell struct {
	rtt   time.Duration
	loss  float64
	ca    *lmtest.CA
	dns   *lmtest.DNSServer
	node  *lmtest.Node
	sched *lmtest.Node
	dnsP  *netem.Proxy
	nodeP *netem.Proxy
	schP  *netem.Proxy
	res   *net.Resolver
	url   string
}

func newCell(rtt time.Duration, loss float64, seed uint64) (*cell, error) {
	c := &cell{rtt: rtt, loss: loss}
	var err error
	if c.ca, err = lmtest.NewCA(); err != nil {
		return nil, err
	}
	lo := netip.MustParseAddr("127.0.0.1")
	if c.dns, err = lmtest.NewDNSServer(map[string][]netip.Addr{"api.example": {lo}, "sched.example": {lo}}, 300); err != nil {
		return nil, err
	}
	if c.node, err = lmtest.NewNode("n", c.ca, lmtest.NodeOptions{Names: []string{"api.example"}}); err != nil {
		return nil, err
	}
	path := netem.Config{OneWay: rtt / 2, Loss: loss, Seed: seed}
	// DNS crosses the path's delay but not its loss: a lost query costs
	// every contender the same resolver timeout, which would swamp the
	// comparison of transports.
	if c.dnsP, err = netem.New(c.dns.Addr(), netem.Config{OneWay: rtt / 2}); err != nil {
		return nil, err
	}
	if c.nodeP, err = netem.New(c.node.Addr(), path); err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(c.nodeP.Addr())
	sched := lmtest.NewScheduler(300, lmtest.AccessNode{Addr: c.nodeP.Addr()})
	if c.sched, err = lmtest.NewNode("sched", c.ca, lmtest.NodeOptions{Names: []string{"sched.example"}, Handler: sched}); err != nil {
		return nil, err
	}
	if c.schP, err = netem.New(c.sched.Addr(), path); err != nil {
		return nil, err
	}
	c.res = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		if network == "udp" || network == "udp4" {
			return (&net.Dialer{}).DialContext(ctx, "udp", c.dnsP.Addr())
		}
		return c.dnsP.Dial(ctx, "tcp", c.dnsP.Addr())
	}}
	c.url = "https://api.example:" + port + "/"
	return c, nil
}

func (c *cell) close() {
	for _, x := range []io.Closer{c.nodeP, c.schP, c.dnsP, c.node, c.sched, c.dns} {
		if x != nil {
			x.Close()
		}
	}
}

// dial charges the path's TCP handshake for node and scheduler addresses.
func (c *cell) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if addr == c.schP.Addr() {
		return c.schP.Dial(ctx, network, addr)
	}
	return c.nodeP.Dial(ctx, network, addr)
}

type contender struct {
	name string
	rt   func(c *cell) (http.RoundTripper, func(), error)
}

func plain(c *cell) (http.RoundTripper, func(), error) {
	tr := &http.Transport{
		ForceAttemptHTTP2: true,
		TLSClientConfig:   &tls.Config{RootCAs: c.ca.Pool()},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			ips, err := c.res.LookupNetIP(ctx, "ip", host)
			if err != nil {
				return nil, err
			}
			return c.dial(ctx, network, net.JoinHostPort(ips[0].Unmap().String(), port))
		},
	}
	return tr, tr.CloseIdleConnections, nil
}

func chain(steps []lastmile.RouteStep, h3 bool, sched bool) func(c *cell) (http.RoundTripper, func(), error) {
	return func(c *cell) (http.RoundTripper, func(), error) {
		cfg := lastmile.Config{
			Steps: steps,
			DNS:   lastmile.DNSConfig{Order: []lastmile.ResolverStep{lastmile.StepSystem}, Timeout: 10 * time.Second},
			Race:  lastmile.RaceConfig{DisableH3: !h3, AssumeH3: h3, ConnectTimeout: 10 * time.Second},
		}
		if sched {
			cfg.Scheduler.URL = "https://sched.example:" + port(c.schP.Addr()) + "/v1/schedule"
			cfg.Scheduler.Timeout = 10 * time.Second
		}
		tp, err := lastmile.New(cfg, lastmile.Options{SystemResolver: c.res, RootCAs: c.ca.Pool(),
			DialContext: c.dial, Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
		if err != nil {
			return nil, nil, err
		}
		return tp, func() { tp.Close() }, nil
	}
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

type sample struct {
	cold, warm time.Duration
	proto      string
	err        error
}

func attempt(c *cell, ct contender, timeout time.Duration) sample {
	rt, closeRT, err := ct.rt(c)
	if err != nil {
		return sample{err: err}
	}
	defer closeRT()
	get := func() (time.Duration, string, error) {
		tr := &lastmile.Trace{}
		ctx, cancel := context.WithTimeout(lastmile.WithTrace(context.Background(), tr), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return 0, "", err
		}
		d := time.Since(start)
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		proto := tr.Protocol
		if proto == "" {
			proto = resp.Proto
		}
		return d, proto, err
	}
	cold, proto, err := get()
	if err != nil {
		return sample{err: err}
	}
	warm, _, err := get()
	return sample{cold: cold, warm: warm, proto: proto, err: err}
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 0, 64) }

func main() {
	n := flag.Int("n", 40, "cold starts per contender and cell")
	workers := flag.Int("workers", 4, "rounds run concurrently")
	rtts := flag.String("rtt", "50ms,150ms,300ms", "round-trip times")
	losses := flag.String("loss", "0,0.01,0.05", "loss probabilities (UDP datagrams; TCP chunks as retransmission delay)")
	timeout := flag.Duration("timeout", 20*time.Second, "deadline of one request")
	only := flag.String("contenders", "plain,lm-tcp,lm-h3,lm-sched-h3", "contenders")
	flag.Parse()
	all := []contender{
		{"plain", plain},
		{"lm-tcp", chain([]lastmile.RouteStep{lastmile.StepDirect}, false, false)},
		{"lm-h3", chain([]lastmile.RouteStep{lastmile.StepDirect}, true, false)},
		{"lm-sched-h3", chain([]lastmile.RouteStep{lastmile.StepScheduler, lastmile.StepDirect}, true, true)},
	}
	var cts []contender
	for _, c := range all {
		if slices.Contains(strings.Split(*only, ","), c.name) {
			cts = append(cts, c)
		}
	}
	fmt.Printf("# lastmilertt -n %d -workers %d, %s, on a shared 2-core machine (delays dominate; CPU contention adds noise)\n", *n, *workers, time.Now().UTC().Format(time.RFC3339))
	fmt.Println("| RTT | loss | contender | cold TTFB median | p90 | warm TTFB median | h3 share | failures | cold median / plain |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, rs := range strings.Split(*rtts, ",") {
		rtt, err := time.ParseDuration(rs)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, ls := range strings.Split(*losses, ",") {
			loss, err := strconv.ParseFloat(ls, 64)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			c, err := newCell(rtt, loss, uint64(rtt)+uint64(loss*1000))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			samples := make([][]sample, len(cts))
			var mu sync.Mutex
			rounds := make(chan int)
			var wg sync.WaitGroup
			for range *workers {
				wg.Go(func() {
					for r := range rounds {
						for k := range cts {
							j := (r + k) % len(cts) // rotate who goes first
							s := attempt(c, cts[j], *timeout)
							mu.Lock()
							samples[j] = append(samples[j], s)
							mu.Unlock()
						}
					}
				})
			}
			for r := range *n {
				rounds <- r
			}
			close(rounds)
			wg.Wait()
			c.close()
			var plainMed time.Duration
			for j, ct := range cts {
				var cold, warm []time.Duration
				fails, h3 := 0, 0
				for _, s := range samples[j] {
					if s.err != nil {
						fails++
						continue
					}
					cold = append(cold, s.cold)
					warm = append(warm, s.warm)
					if s.proto == "h3" || s.proto == "HTTP/3.0" {
						h3++
					}
				}
				med := quantile(cold, 0.5)
				if ct.name == "plain" {
					plainMed = med
				}
				ratio := "-"
				if plainMed > 0 && len(cold) > 0 {
					ratio = strconv.FormatFloat(float64(med)/float64(plainMed), 'f', 2, 64)
				}
				fmt.Printf("| %s | %g %% | %s | %s ms | %s ms | %s ms | %d/%d | %d | %s |\n", rtt, loss*100, ct.name,
					ms(med), ms(quantile(cold, 0.9)), ms(quantile(warm, 0.5)), h3, len(cold), fails, ratio)
			}
		}
	}
}
