package failover

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

// pipeNet is an in-process network for synctest bubbles (loopback sockets
// would keep a bubble from ever idling): each live domain is a real
// http.Server accepting net.Pipe connections; dialing a domain whose server
// is down fails with ECONNREFUSED, as a closed port does.
type pipeNet struct {
	mu      sync.Mutex
	servers map[string]*pipeServer
}

type pipeServer struct {
	srv *http.Server
	ln  *chanListener
}

func newPipeNet() *pipeNet { return &pipeNet{servers: map[string]*pipeServer{}} }

func (p *pipeNet) up(name string) {
	ln := &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, name)
	})}
	go srv.Serve(ln)
	p.mu.Lock()
	p.servers[name] = &pipeServer{srv: srv, ln: ln}
	p.mu.Unlock()
}

func (p *pipeNet) down(name string) {
	p.mu.Lock()
	s := p.servers[name]
	delete(p.servers, name)
	p.mu.Unlock()
	if s != nil {
		s.srv.Close()
	}
}

func (p *pipeNet) close() {
	p.mu.Lock()
	var names []string
	for n := range p.servers {
		names = append(names, n)
	}
	p.mu.Unlock()
	for _, n := range names {
		p.down(n)
	}
}

func (p *pipeNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	refused := &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	p.mu.Lock()
	s := p.servers[host]
	p.mu.Unlock()
	if s == nil {
		return nil, refused
	}
	client, server := net.Pipe()
	select {
	case s.ln.ch <- server:
		return client, nil
	case <-s.ln.done:
		return nil, refused
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// TestRealClockTimers runs the Transport on the real clock (Config.Clock
// nil) inside a synctest bubble: the low-traffic streak timeout T, the
// canary, the recovery timer and its linear growth all fire from the
// Transport's own timer, at exactly the configured times.
func TestRealClockTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		pn.up("primary.test")
		pn.up("dc1.test")
		next := &http.Transport{DialContext: pn.dial}
		ev := make(events, 16)
		tr, err := NewTransport(Config{
			Policy:       PolicyUber, // the seed's timers
			Primary:      "primary.test",
			Backups:      []string{"dc1.test"},
			Registerer:   prometheus.NewRegistry(),
			Logger:       obs.Discard,
			OnTransition: ev.on,
		}, next)
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Transport: tr}
		mustGet(t, c, "http://primary.test/", "primary.test")

		// one failure, then silence: T later the streak times out
		pn.down("primary.test")
		mustFail(t, c, "http://primary.test/")
		time.Sleep(DefaultFailureTimeout - time.Nanosecond)
		synctest.Wait()
		ev.none(t)
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		ev.want(t, Primary, Failover, ReasonStreakTimeout, "primary.test")
		ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc1.test")
		mustGet(t, c, "http://primary.test/", "dc1.test")

		// first recovery probe after 10s: primary still down
		time.Sleep(DefaultRecoveryTimeout - time.Nanosecond)
		synctest.Wait()
		ev.none(t)
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		ev.want(t, Backup, Recovery, ReasonRecoveryTimer, "dc1.test")
		ev.want(t, Recovery, Backup, ReasonRecoveryFailure, "dc1.test")

		// the second probe comes 20s later and finds primary back
		pn.up("primary.test")
		time.Sleep(DefaultRecoveryTimeout + DefaultRecoveryTimeoutStep - time.Nanosecond)
		synctest.Wait()
		ev.none(t)
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		ev.want(t, Backup, Recovery, ReasonRecoveryTimer, "dc1.test")
		ev.want(t, Recovery, Primary, ReasonRecoverySuccess, "primary.test")
		mustGet(t, c, "http://primary.test/", "primary.test")

		tr.Close()
		next.CloseIdleConnections()
		pn.close()
	})
}

// TestCanaryBackoffRealClock: with every domain down, failed canary rounds
// in FAILOVER come CanaryRetryInterval apart at first, then twice as far
// each time up to CanaryRetryMax, from the Transport's own timer on the
// real clock (inside a synctest bubble, so the instants are exact).
func TestCanaryBackoffRealClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		pn.up("primary.test")
		next := &http.Transport{DialContext: pn.dial}
		ev := make(events, 16)
		var mu sync.Mutex
		var at []time.Duration
		start := time.Now()
		tr, err := NewTransport(Config{
			Policy:       PolicyUber, // the seed's timers
			Primary:      "primary.test",
			Backups:      []string{"dc1.test"},
			Registerer:   prometheus.NewRegistry(),
			Logger:       obs.Discard,
			OnTransition: ev.on,
			OnCanary: func(domain string, c Canary) {
				mu.Lock()
				at = append(at, time.Since(start))
				mu.Unlock()
			},
		}, next)
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Transport: tr}
		mustGet(t, c, "http://primary.test/", "primary.test")
		pn.down("primary.test")
		for range 3 {
			mustFail(t, c, "http://primary.test/")
		}
		synctest.Wait()
		ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
		// rounds at 0, +5s, +10s, +20s, +30s (cap), +30s
		time.Sleep(95 * time.Second)
		synctest.Wait()
		ev.none(t)
		mu.Lock()
		got := append([]time.Duration(nil), at...)
		mu.Unlock()
		want := []time.Duration{0, 5 * time.Second, 15 * time.Second, 35 * time.Second, 65 * time.Second, 95 * time.Second}
		if len(got) != len(want) {
			t.Fatalf("canaries at %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("canaries at %v, want %v", got, want)
			}
		}
		// dc1 comes up: the next round (30s later) moves to it
		pn.up("dc1.test")
		time.Sleep(DefaultCanaryRetryMax)
		synctest.Wait()
		ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc1.test")

		tr.Close()
		next.CloseIdleConnections()
		pn.close()
	})
}
