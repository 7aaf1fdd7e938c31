package test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/failover"
	"github.com/veerhq/veer/lastmile"
	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

func portOf(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// The README's client stack on a cold start into a blackholed primary: its
// SYNs are dropped (or accepted and never answered) and its QUIC packets
// swallowed. An app with a 1 s http.Client timeout sends requests from four
// goroutines; each request's deadline passes inside lastmile's chain. That
// is a network failure of the primary (a connect timeout), not the app
// cancelling: failover must count it and reach BACKUP within 3 s.
func TestClientSDKColdStartIntoBlackhole(t *testing.T) {
	for _, accept := range []bool{false, true} {
		name := "syn-dropped"
		if accept {
			name = "accepted-silent"
		}
		t.Run(name, func(t *testing.T) {
			ca, err := lmtest.NewCA()
			if err != nil {
				t.Fatal(err)
			}
			hole, err := lmtest.NewBlackhole(accept)
			if err != nil {
				t.Fatal(err)
			}
			defer hole.Close()
			backup, err := lmtest.NewNode("backup", ca, lmtest.NodeOptions{Names: []string{"dc1.veer.test"}})
			if err != nil {
				t.Fatal(err)
			}
			defer backup.Close()

			reg := prometheus.NewRegistry()
			lm, err := lastmile.New(lastmile.Config{
				Steps: []lastmile.RouteStep{lastmile.StepDirect},
				DNS: lastmile.DNSConfig{
					Order:     []lastmile.ResolverStep{lastmile.StepBootstrap},
					Bootstrap: map[string][]string{"api.veer.test": {"127.0.0.1"}, "dc1.veer.test": {"127.0.0.1"}},
				},
			}, lastmile.Options{RootCAs: ca.Pool(), Registerer: reg, Logger: obs.Discard})
			if err != nil {
				t.Fatal(err)
			}
			defer lm.Close()
			backups := make(chan failover.Event, 4)
			ft, err := failover.NewTransport(failover.Config{
				Primary:    "api.veer.test:" + portOf(hole.Addr()),
				Backups:    []string{"dc1.veer.test:" + portOf(backup.Addr())},
				Registerer: reg,
				Logger:     obs.Discard,
				OnTransition: func(e failover.Event) {
					if e.To == failover.Backup {
						select {
						case backups <- e:
						default:
						}
					}
				},
			}, lm)
			if err != nil {
				t.Fatal(err)
			}
			defer ft.Close()
			client := &http.Client{Transport: ft, Timeout: time.Second}
			url := "https://api.veer.test:" + portOf(hole.Addr()) + "/"

			start := time.Now()
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var served atomic.Int64
			for range 4 {
				wg.Go(func() {
					for ctx.Err() == nil {
						resp, err := client.Get(url)
						if err == nil {
							resp.Body.Close()
							if resp.StatusCode == http.StatusOK {
								served.Add(1)
							}
						}
					}
				})
			}
			select {
			case e := <-backups:
				if d := time.Since(start); d > 3*time.Second {
					t.Errorf("BACKUP after %v, want within 3s", d)
				}
				if !strings.HasPrefix(e.Domain, "dc1.veer.test") {
					t.Errorf("BACKUP on %q", e.Domain)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("no BACKUP within 10s; state %v", ft.State())
			}
			// Requests now reach the backup.
			for served.Load() == 0 && time.Since(start) < 10*time.Second {
				resp, err := client.Get(url)
				if err == nil {
					resp.Body.Close()
				}
			}
			stop()
			wg.Wait()
			if served.Load() == 0 {
				t.Error("no request served by the backup after BACKUP")
			}
		})
	}
}

// countingDialer counts TCP dials per address.
type countingDialer struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *countingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[addr]++
	d.mu.Unlock()
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func (d *countingDialer) count(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[addr]
}

// Eight concurrent first requests to a host that refuses (TCP port closed,
// UDP port closed) share one failed chain run, as they would share a
// successful one: one TCP dial for all eight, every one failing with the
// refusal; and a request right after fails from the remembered failure
// without dialling again.
func TestClientSDKConcurrentRequestsShareAFailedDiscovery(t *testing.T) {
	pc, ln, err := lmtest.ListenPair()
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	pc.Close()

	var d countingDialer
	lm, err := lastmile.New(lastmile.Config{
		Steps: []lastmile.RouteStep{lastmile.StepDirect},
		DNS: lastmile.DNSConfig{
			Order:     []lastmile.ResolverStep{lastmile.StepBootstrap},
			Bootstrap: map[string][]string{"api.veer.test": {"127.0.0.1"}},
		},
	}, lastmile.Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard, DialContext: d.dial})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	url := "https://api.veer.test:" + portOf(dead) + "/"
	get := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := lm.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			return errors.New("a refusing host answered")
		}
		return err
	}
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = get() })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, lastmile.ErrNoRoute) || outcome.ClassifyError(err) != outcome.ConnectRefused {
			t.Errorf("request %d: %v (kind %v), want ErrNoRoute, connect_refused", i, err, outcome.ClassifyError(err))
		}
	}
	if n := d.count(dead); n != 1 {
		t.Errorf("%d TCP dials for 8 concurrent requests, want 1 (one shared chain run)", n)
	}
	err = get()
	if outcome.ClassifyError(err) != outcome.ConnectRefused {
		t.Errorf("request after the failed run: %v", err)
	}
	if n := d.count(dead); n != 1 {
		t.Errorf("%d TCP dials after one more request, want still 1 (failure remembered)", n)
	}
}
