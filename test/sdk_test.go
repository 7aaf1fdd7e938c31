package test

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/failover"
	"github.com/veerhq/veer/lastmile"
	"github.com/veerhq/veer/lastmile/lmtest"
	"github.com/veerhq/veer/obs"
)

// The client SDK as an app builds it: failover picks the domain, lastmile
// reaches it. Real DNS servers, real TLS nodes speaking HTTP/3 and HTTP/2 on
// loopback; the failover timers run on a manual clock so the test decides
// when the recovery timer expires.
func TestClientSDKFailoverOverLastMile(t *testing.T) {
	ca, err := lmtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	primary, err := lmtest.NewNode("primary", ca, lmtest.NodeOptions{Names: []string{"api.veer.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	backup, err := lmtest.NewNode("backup", ca, lmtest.NodeOptions{Names: []string{"dc1.veer.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer backup.Close()
	lo := netip.MustParseAddr("127.0.0.1")
	records := map[string][]netip.Addr{"api.veer.test.": {lo}, "dc1.veer.test.": {lo}}

	// The public resolver is dead (SERVFAIL); the private DNS answers.
	public, err := lmtest.NewDNSServer(records, 60)
	if err != nil {
		t.Fatal(err)
	}
	defer public.Close()
	public.SetMode(lmtest.ServFail)
	private, err := lmtest.NewDNSServer(records, 60)
	if err != nil {
		t.Fatal(err)
	}
	defer private.Close()

	reg := prometheus.NewRegistry()
	lm, err := lastmile.New(lastmile.Config{
		Steps: []lastmile.RouteStep{lastmile.StepDirect},
		DNS: lastmile.DNSConfig{
			Order:          []lastmile.ResolverStep{lastmile.StepSystem, lastmile.StepPrivateUDP},
			PrivateServers: []string{private.Addr()},
		},
	}, lastmile.Options{SystemResolver: public.Resolver(), RootCAs: ca.Pool(), Registerer: reg, Logger: obs.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()

	port := func(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
	events := make(chan failover.Event, 16)
	mclk := clock.NewManual(time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC))
	ft, err := failover.NewTransport(failover.Config{
		Primary:          "api.veer.test:" + port(primary.Addr()),
		Backups:          []string{"dc1.veer.test:" + port(backup.Addr())},
		FailureThreshold: 3,
		RecoveryTimeout:  10 * time.Second,
		CanaryTimeout:    5 * time.Second,
		Clock:            mclk,
		Registerer:       reg,
		Logger:           obs.Discard,
		OnTransition:     func(e failover.Event) { events <- e },
	}, lm)
	if err != nil {
		t.Fatal(err)
	}
	defer ft.Close()
	client := &http.Client{Transport: ft}
	url := "https://api.veer.test:" + port(primary.Addr()) + "/trips"

	get := func() (string, *lastmile.Trace, error) {
		tr := &lastmile.Trace{}
		// A dead edge may swallow packets on a pooled connection: the
		// deadline turns that into a response timeout, a network failure.
		ctx, cancel := context.WithTimeout(lastmile.WithTrace(context.Background(), tr), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := client.Do(req)
		if err != nil {
			return "", tr, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), tr, nil
	}
	next := func(want failover.State) failover.Event {
		t.Helper()
		select {
		case e := <-events:
			if e.To != want {
				t.Fatalf("transition %v -> %v (%v), want -> %v", e.From, e.To, e.Reason, want)
			}
			return e
		case <-time.After(15 * time.Second):
			t.Fatalf("no transition to %v", want)
			return failover.Event{}
		}
	}

	// 1. Public DNS dead: lastmile resolves through the private DNS and the
	// request reaches the primary; failover has nothing to do.
	body, tr, err := get()
	if err != nil || !strings.HasPrefix(body, "primary") {
		t.Fatalf("first request: %q, %v (trace %+v)", body, err, tr)
	}
	if tr.Resolver != lastmile.StepPrivateUDP || len(tr.FailedSteps()) == 0 {
		t.Fatalf("trace: resolver %q, failed steps %v; want private_udp after a failed system step", tr.Resolver, tr.FailedSteps())
	}
	if ft.State() != failover.Primary {
		t.Fatalf("state %v", ft.State())
	}

	// 2. The primary's cloud edge dies (TCP resets, QUIC blackholed). Three
	// network failures in a row; the canary to dc1 goes through lastmile too
	// and succeeds: BACKUP, and the app's traffic now lands on dc1.
	primary.BlockTCP(true)
	primary.BlockQUIC(true)
	for i := range 3 {
		if _, _, err := get(); err == nil {
			t.Fatalf("request %d to a dead primary succeeded", i)
		}
	}
	next(failover.Failover)
	if e := next(failover.Backup); !strings.HasPrefix(e.Domain, "dc1.veer.test") {
		t.Fatalf("BACKUP on %q", e.Domain)
	}
	body, _, err = get()
	if err != nil || !strings.HasPrefix(body, "backup") {
		t.Fatalf("request in BACKUP: %q, %v", body, err)
	}

	// 3. The recovery timer fires while the primary is still dead: the
	// canary fails, back to BACKUP.
	mclk.Advance(10 * time.Second)
	next(failover.Recovery)
	next(failover.Backup)

	// 4. The primary comes back; the app moved to another network, which
	// failover passes on to lastmile (routes dropped) and which starts an
	// early recovery probe: PRIMARY again, traffic on the primary.
	primary.BlockTCP(false)
	primary.BlockQUIC(false)
	ft.NetworkChanged()
	next(failover.Recovery)
	next(failover.Primary)
	body, tr, err = get()
	if err != nil || !strings.HasPrefix(body, "primary") {
		t.Fatalf("request after recovery: %q, %v", body, err)
	}
	if primary.Hits() < 2 || backup.Hits() < 2 {
		t.Fatalf("hits: primary %d, backup %d; want both to have served app traffic and canaries", primary.Hits(), backup.Hits())
	}
	if tr.Protocol == "" {
		t.Fatalf("trace of the request after recovery has no protocol: %+v", tr)
	}
	if errs := obs.Lint(reg); len(errs) > 0 {
		t.Fatal(errs)
	}
}
