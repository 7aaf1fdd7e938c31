package shed

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/tier"
)

// TestHeldRefusalsAndCritical: do held refusals cost critical requests
// anything, over real sockets? An endpoint in a rejection storm holds the
// refusals of a closed-loop storm (stormConns of them at once, on a manual
// clock that never moves, so they stay held for the whole test); then
// critical requests are sent. The assertions do not depend on timing: a
// held refusal never ends by itself here, so a critical request that needs
// one to end is never served.
//
// Found: the stage, the pacer and net/http's server (a goroutine per
// HTTP/1.1 connection, a stream per HTTP/2 request) couple nothing to a
// held refusal; a critical request on its own connection, or multiplexed
// on the storm's HTTP/2 connection, is served while every refusal is held.
// But a client whose pool is bounded and shared by the storm (a proxy with
// a per-server connection limit, http.Transport's MaxConnsPerHost, a
// gateway's upstream pool) has every connection busy with a held refusal,
// and its critical request waits for one to end (so does one multiplexed
// on a connection whose stream limit the held refusals fill, when the
// client waits for a stream rather than open a connection): up to the hold, per
// request, for as long as the storm lasts. Hence the default: a
// connection that has carried a critical request is never held (a shared
// pool that carried one before the storm keeps a connection that answers
// at once), and HTTP/2 refusals are held only when reject_hold is set. The
// rows a default hold still loses are those of a shared bounded pool that
// the storm reached before any critical request ("storm first"): its first
// critical request waits for a held refusal to end (docs/shed.md).
func TestHeldRefusalsAndCritical(t *testing.T) {
	const stormConns, someHeld = 16, -1
	for _, c := range []struct {
		name       string
		hold       time.Duration
		h2         bool // TLS with HTTP/2: one connection carries everything
		sharedPool bool // the storm and the critical requests share a pool of stormConns connections
		// strict: the server allows stormConns streams per HTTP/2
		// connection and the client waits for a stream rather than open
		// another connection (as a proxy multiplexing onto one
		// connection does)
		strict bool
		// stormFirst: no critical request used the storm's pool before the
		// storm (else one did, and its connection is marked)
		stormFirst bool
		held       int64 // storm refusals held (the others are answered at once); someHeld: 1 to stormConns-1
		served     bool  // critical requests are answered while the storm's refusals are held
	}{
		{"h1 own connections", StormRejectHold, false, false, false, false, stormConns, true},
		{"h1 own connections, zero config", 0, false, false, false, false, stormConns, true},
		{"h2 one connection", StormRejectHold, true, false, false, false, stormConns, true},
		// The critical request before the storm marked one connection of
		// the pool: the storm requests that take it (one, or more when it
		// frees before their own dials end) are not held, and the critical
		// requests pass through it.
		{"h1 shared bounded pool", StormRejectHold, false, true, false, false, someHeld, true},
		{"h1 shared bounded pool, storm first", StormRejectHold, false, true, false, true, stormConns, false},
		{"h1 shared bounded pool, hold off", -1, false, true, false, false, 0, true},
		{"h1 shared bounded pool, hold off, storm first", -1, false, true, false, true, 0, true},
		{"h1 shared bounded pool, zero config", 0, false, true, false, false, someHeld, true},
		{"h1 shared bounded pool, zero config, storm first", 0, false, true, false, true, stormConns, false},
		{"h2 shared bounded pool, storm first", StormRejectHold, true, true, false, true, stormConns, true},
		// One HTTP/2 connection carries everything: marked, never held.
		{"h2 shared, strict stream limit", StormRejectHold, true, true, true, false, 0, true},
		{"h2 shared, strict stream limit, storm first", StormRejectHold, true, true, true, true, stormConns, false},
		{"h2 shared, strict stream limit, zero config", 0, true, true, true, false, 0, true},
		{"h2 shared, strict stream limit, zero config, storm first", 0, true, true, true, true, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewManual(time.Unix(1e9, 0))
			s, _ := newShedder(t, Config{Limit: LimitConfig{Static: 4}, RejectHold: c.hold, Clock: clk})
			var crit atomic.Int64
			h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tier.FromContext(r.Context()) == tier.Critical {
					crit.Add(1)
				}
			}))
			srv := httptest.NewUnstartedServer(h)
			srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes cut short by Close
			if c.h2 {
				srv.EnableHTTP2 = true
				if c.strict {
					srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: stormConns}
				}
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			newTransport := func(conns int) *http.Transport {
				tr := srv.Client().Transport.(*http.Transport).Clone()
				tr.MaxConnsPerHost, tr.MaxIdleConnsPerHost = conns, conns
				if c.h2 {
					tr.ForceAttemptHTTP2 = true
					tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}
					tr.HTTP2 = &http.HTTP2Config{StrictMaxConcurrentRequests: c.strict}
				}
				return tr
			}
			stormTr := newTransport(stormConns)
			defer stormTr.CloseIdleConnections()
			critTr := stormTr
			if !c.sharedPool {
				critTr = newTransport(0)
				defer critTr.CloseIdleConnections()
			}
			send := func(tr *http.Transport, ctx context.Context, t tier.Tier) (int, error) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/a", nil)
				if t != tier.Unset {
					req.Header.Set(tier.Header, t.String())
				}
				resp, err := tr.RoundTrip(req)
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				_, err = io.Copy(io.Discard, resp.Body)
				return resp.StatusCode, err
			}
			first := tier.Critical
			if c.stormFirst {
				first = tier.SheddablePlus
			}
			if code, err := send(critTr, context.Background(), first); code != http.StatusOK {
				t.Fatalf("%v before the storm: %d, %v", first, code, err)
			}
			// The endpoint is in a storm and refuses the default tier on
			// arrival. The clock never moves: nothing recomputes that.
			st := s.lookup("/a")
			st.maybeTick(clk.Now()) // the first interval starts now and never ends
			st.floor.Store(uint32(tier.Critical))
			st.shedding.Store(true)
			st.storm.Store(true)
			st.deepStorm.Store(true) // a closed-loop storm (stormDeepRatio)

			var storm sync.WaitGroup
			var answered atomic.Int64
			for range stormConns {
				storm.Go(func() {
					if code, err := send(stormTr, context.Background(), tier.Unset); code != http.StatusServiceUnavailable {
						t.Errorf("storm request: %d, %v; want 503", code, err)
					}
					answered.Add(1)
				})
			}
			// Every storm request is either held or answered (the clock
			// that would end a hold never moves).
			waitStorm(t, s, &answered, stormConns)
			heldBefore := s.held.Load()
			if c.held == someHeld && (heldBefore < 1 || heldBefore >= stormConns) || c.held != someHeld && heldBefore != c.held {
				t.Errorf("%d of the storm's %d refusals held, want %d", heldBefore, stormConns, c.held)
			}

			// Critical requests, at once, each with 1 s to be answered
			// (far more than they need unless blocked).
			const n = 4
			var served atomic.Int64
			var crits sync.WaitGroup
			for range n {
				crits.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					code, err := send(critTr, ctx, tier.Critical)
					switch {
					case code == http.StatusOK:
						served.Add(1)
					case errors.Is(err, context.DeadlineExceeded):
					default:
						t.Errorf("critical in the storm: %d, %v", code, err)
					}
				})
			}
			crits.Wait()
			if held := s.held.Load(); held != heldBefore {
				t.Errorf("%d refusals held after the critical requests, want all %d still held", held, heldBefore)
			}
			if got := served.Load() == n; got != c.served {
				t.Errorf("critical requests served while %d of the storm's refusals are held: %d of %d (server saw %d), want all: %v",
					heldBefore, served.Load(), n, crit.Load(), c.served)
			}
			// End the holds: the storm's clients get their 503s.
			s.Close()
			storm.Wait()
		})
	}
}

// waitStorm waits until each of n storm requests is held or answered
// (they reach the hold on the server's goroutines after their requests
// were sent; the clock that would end them never moves).
func waitStorm(t *testing.T, s *Shedder, answered *atomic.Int64, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.held.Load()+answered.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d refusals held and %d answered after 10s, want %d in all", s.held.Load(), answered.Load(), n)
		}
		runtime.Gosched()
	}
}
