package failover

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/veerhq/veer/obs"
)

// TestOneCanaryInFlight: a canary still in flight when the policy asks for
// the same domain again is not duplicated; its answer serves the new ask.
func TestOneCanaryInFlight(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test")
	r := newRig(t, l, filepath.Join(t.TempDir(), "f.json"), func(c *Config) {
		c.Backups = []string{"dc1.test"}
		c.CanaryTimeout = waitTimeout
	})
	hold := l.server("dc1.test").holdCanaries()
	mustGet(t, r.c, "http://primary.test/", "primary.test")
	l.down("primary.test")
	for range 3 {
		mustFail(t, r.c, "http://primary.test/")
	}
	r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
	<-hold // the canary to dc1 is at the server, unanswered

	// the network was fine after all: back to PRIMARY, canary still out
	l.up("primary.test")
	mustGet(t, r.c, "http://primary.test/", "primary.test")
	r.ev.want(t, Failover, Primary, ReasonPrimarySuccess, "primary.test")

	// a new outage asks for dc1 again: folded into the canary in flight
	l.down("primary.test")
	for range 3 {
		mustFail(t, r.c, "http://primary.test/")
	}
	r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
	hold <- struct{}{} // release the one canary
	r.can.want(t, "dc1.test ok")
	r.ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc1.test")
	if got := len(l.server("dc1.test").canaries()); got != 1 {
		t.Fatalf("dc1 received %d canaries, want 1", got)
	}
}

// TestCanaryTimeout: a backup that accepts connections but never answers
// (a real read timeout) fails its canary after CanaryTimeout, and the next
// backup is tried.
func TestCanaryTimeout(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test", "dc2.test")
	r := newRig(t, l, filepath.Join(t.TempDir(), "f.json"), func(c *Config) { c.CanaryTimeout = time.Second })
	mustGet(t, r.c, "http://primary.test/", "primary.test")
	l.blackhole("dc1.test")
	l.down("primary.test")
	for range 3 {
		mustFail(t, r.c, "http://primary.test/")
	}
	r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
	r.can.want(t, "dc1.test fail", "dc2.test ok")
	r.ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc2.test")
	if got := counter(t, r.reg, "veer_failover_canaries_total", map[string]string{"domain": "backup_1", "result": "failure"}); got != 1 {
		t.Fatalf("dc1 canary failures %v, want 1", got)
	}
}

// TestConfirmPrimary: with ConfirmPrimary, the Transport canaries the
// primary after a backup answered. A real primary outage (its listener
// closed) still ends in BACKUP; the seed's race (the device's network comes
// back between two canary rounds, so a backup canary succeeds while primary
// is fine) ends on PRIMARY instead of a BACKUP stint.
func TestConfirmPrimary(t *testing.T) {
	confirm := func(c *Config) { c.ConfirmPrimary = true }
	t.Run("primary down", func(t *testing.T) {
		l := newLab(t, "primary.test", "dc1.test", "dc2.test")
		r := newRig(t, l, filepath.Join(t.TempDir(), "f.json"), confirm)
		l.down("primary.test")
		for range 3 {
			mustFail(t, r.c, "http://primary.test/")
		}
		r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
		r.can.want(t, "dc1.test ok", "primary.test fail")
		r.ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc1.test")
		r.store.want(t, "save dc1.test")
		mustGet(t, r.c, "http://primary.test/", "dc1.test")
	})
	t.Run("network back between canary rounds", func(t *testing.T) {
		l := newLab(t, "primary.test", "dc1.test", "dc2.test")
		r := newRig(t, l, filepath.Join(t.TempDir(), "f.json"), confirm)
		mustGet(t, r.c, "http://primary.test/", "primary.test")
		l.setTunnel(true)
		for range 3 {
			mustFail(t, r.c, "http://primary.test/")
		}
		r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
		r.can.want(t, "dc1.test fail", "dc2.test fail")
		l.setTunnel(false)
		// the next round's backup canary answers before any regular request
		r.clk.Advance(DefaultCanaryRetryInterval)
		r.can.want(t, "dc1.test ok", "primary.test ok")
		r.ev.want(t, Failover, Primary, ReasonPrimaryConfirmed, "primary.test")
		r.wantState(t, Primary, "primary.test")
		r.ev.none(t)
		if _, err := os.Stat(r.path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("store file: %v, want none (never in BACKUP)", err)
		}
	})
}

// networkAware is a round tripper with per-network state of its own, like
// lastmile.Transport.
type networkAware struct {
	http.RoundTripper
	changed atomic.Int32
}

func (n *networkAware) NetworkChanged() { n.changed.Add(1) }

func TestNetworkChangedReachesWrappedTransport(t *testing.T) {
	next := &networkAware{RoundTripper: http.DefaultTransport}
	tr, err := NewTransport(Config{Primary: "api.test", Backups: []string{"dc1.test"}, Registerer: prometheus.NewRegistry(), Logger: obs.Discard}, next)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.NetworkChanged()
	tr.NetworkChanged()
	if n := next.changed.Load(); n != 2 {
		t.Fatalf("wrapped transport saw %d network changes, want 2", n)
	}
}
