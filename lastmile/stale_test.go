package lastmile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/veerhq/veer/lastmile/lmtest"
)

// The private DNS freezes (no answer over UDP or TCP) on a cold start with
// an expired answer on disk. RFC 8767's client timer serves the stale
// answer after StaleAnswerTimeout, well inside a deadline shorter than the
// chain's two timeouts; the lookup goes on in the background, asks the
// frozen server once per transport (private_race does not repeat UDP after
// private_udp timed out), and remembers it dead: the next request is
// answered from stale data without asking it again.
func TestResolverStaleTimerAndDeadServer(t *testing.T) {
	e := newDNSEnv(t, apiRecords)
	path := filepath.Join(t.TempDir(), "dns.json")
	now := time.Now().UTC()
	file := fmt.Sprintf(`{"version":1,"entries":[{"name":"api.test.","addrs":["127.0.0.9"],"expires":%q,"stored":%q}]}`,
		now.Add(-time.Hour).Format(time.RFC3339Nano), now.Add(-2*time.Hour).Format(time.RFC3339Nano))
	must(t, os.WriteFile(path, []byte(file), 0o600))
	e.private.SetMode(lmtest.Silent)
	cfg := DNSConfig{
		Order:              []ResolverStep{StepPrivateUDP, StepPrivateRace},
		PrivateServers:     []string{e.private.Addr()},
		Timeout:            time.Second,
		StaleAnswerTimeout: 300 * time.Millisecond,
		CacheFile:          path,
	}
	r, err := NewResolver(cfg, e.options(t))
	must(t, err)
	t.Cleanup(func() { r.Close() })

	// 1.5 s deadline: the chain alone needs 2 s (two steps of 1 s).
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	t0 := time.Now()
	got, step, err := r.Resolve(ctx, "api.test")
	took := time.Since(t0)
	cancel()
	// Answered by the stale timer (0.3 s), not when the first step's 1 s
	// timeout (or the caller's deadline) passed: time is left to connect.
	if took >= time.Second {
		t.Errorf("stale answer after %v, want before the first step's 1s timeout", took)
	}
	if err != nil || step != StepStale || len(got) != 1 || got[0].String() != "127.0.0.9" {
		t.Fatalf("Resolve with a frozen DNS and a stale answer: %v via %q, %v; want 127.0.0.9 via stale", got, step, err)
	}
	r.Flush() // the background lookup finished
	// A and AAAA over UDP (private_udp), then over TCP only (private_race).
	if q := e.private.Queries(); q != 4 {
		t.Errorf("%d queries to the frozen server in one chain run, want 4 (UDP not asked twice)", q)
	}
	start := time.Now()
	got, step, err = r.Resolve(context.Background(), "api.test")
	if err != nil || step != StepStale || got[0].String() != "127.0.0.9" {
		t.Fatalf("second Resolve: %v via %q, %v", got, step, err)
	}
	r.Flush()
	if q := e.private.Queries(); q != 4 {
		t.Errorf("%d queries after the second Resolve, want still 4 (dead server remembered); it took %v", q, time.Since(start))
	}
}
