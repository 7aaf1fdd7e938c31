package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/veerhq/veer/async"
	"github.com/veerhq/veer/async/asyncnats/natstest"
)

// crashSubmissions is how many invocations each crash test submits:
// 2 000 by default, because under -race (make test) the child veer process
// is race-built and the 10 000 take 77 s for the embedded test on
// this 2-core machine; VEER_ASYNC_CRASH_N=10000 runs the count
// (about 20 s each without -race).
var crashSubmissions = func() int {
	if n, err := strconv.Atoi(os.Getenv("VEER_ASYNC_CRASH_N")); err == nil && n >= 30 {
		return n
	}
	return 2000
}()

// crashRun is one crash test's bookkeeping: the backend counts runs by
// invocation id; the clients record every 202 by idempotency key.
type crashRun struct {
	mu       sync.Mutex
	runs     map[string]int      // invocation id -> runs at the backend
	keyOf    map[string]string   // invocation id -> the key it ran with
	accepted map[string][]string // key -> ids of its 202s
	ran      chan string
	backend  *httptest.Server
	url      string
	got202   atomic.Int64
	failed   atomic.Int64    // submissions answered with an error or not at all
	unkeyed  bool            // submissions without a key, not resent (batch: true packs them)
	lost     map[string]bool // unkeyed: submissions whose answer never came (stored or not: unknown)
}

func newCrashRun(t *testing.T) *crashRun {
	return newCrashRunKeyed(t, false)
}

func newCrashRunKeyed(t *testing.T, unkeyed bool) *crashRun {
	c := &crashRun{unkeyed: unkeyed, lost: map[string]bool{}, runs: map[string]int{}, keyOf: map[string]string{}, accepted: map[string][]string{}, ran: make(chan string, 4*crashSubmissions)}
	c.backend = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get(async.IDHeader)
		c.mu.Lock()
		c.runs[id]++
		c.keyOf[id] = r.Header.Get("Idempotency-Key")
		if c.unkeyed {
			c.keyOf[id] = strings.TrimPrefix(r.URL.Path, "/jobs/")
		}
		c.mu.Unlock()
		c.ran <- id
	}))
	t.Cleanup(c.backend.Close)
	return c
}

func (c *crashRun) config(t *testing.T, plain, dataDir, asyncExtra string) string {
	path := filepath.Join(t.TempDir(), "gw.yaml")
	y := "listen: {addr: 'off', plain: '" + plain + "', shutdown_timeout: 1s}\n" +
		"data_dir: '" + dataDir + "'\n" +
		"routes: [{name: jobs, async: true, clusters: [{name: b}]}]\n" +
		"clusters: [{name: b, backends: [{address: '" + c.backend.Listener.Addr().String() + "'}]}]\n" +
		"async: {ack_wait: 2s, submit_timeout: 2s, tenant_key: 'header:X-Tenant', groups: [{name: general, concurrency: 32}]" + asyncExtra + "}\n"
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// submit sends submissions 0..n-1 from 16 clients, each with its own
// idempotency key, retrying one until it gets a 202 (a refused connection
// while the gateway is down, a 503 while the store is): what a client that
// must not lose work does.
func (c *crashRun) submit(n int, stop <-chan struct{}) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			cl := &http.Client{Timeout: 3 * time.Second}
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				key := fmt.Sprintf("job-%d", i)
				for {
					req, _ := http.NewRequest("POST", c.url+"/jobs/"+key, strings.NewReader(`{"n":`+fmt.Sprint(i)+`}`))
					if !c.unkeyed {
						req.Header.Set("Idempotency-Key", key)
					}
					req.Header.Set("X-Tenant", fmt.Sprintf("tenant-%d", w%4))
					resp, err := cl.Do(req)
					if err == nil {
						var rep struct{ ID string }
						_ = json.NewDecoder(resp.Body).Decode(&rep)
						_ = resp.Body.Close()
						if resp.StatusCode == http.StatusAccepted && rep.ID != "" {
							c.mu.Lock()
							c.accepted[key] = append(c.accepted[key], rep.ID)
							c.mu.Unlock()
							c.got202.Add(1)
							break
						}
					}
					c.failed.Add(1)
					if c.unkeyed && !refused(err) {
						// resending without a key could run it twice: the
						// client does not know whether it was stored
						c.mu.Lock()
						c.lost[key] = true
						c.mu.Unlock()
						break
					}
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond): // a client's pause before resending
					}
				}
			}
		})
	}
	wg.Wait()
}

// waitAllRan waits until every id that got a 202 ran at the backend.
func (c *crashRun) waitAllRan(t *testing.T, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		c.mu.Lock()
		missing := 0
		for _, ids := range c.accepted {
			for _, id := range ids {
				if c.runs[id] == 0 {
					missing++
				}
			}
		}
		c.mu.Unlock()
		if missing == 0 {
			return
		}
		select {
		case <-c.ran:
		case <-timeout:
			t.Fatalf("%d accepted invocations never ran within %v", missing, d)
		}
	}
}

// check asserts the contract and reports the duplicates: every key got
// one id however often it was resent; every id ran at least once; an id
// that ran twice ran with its own key both times. Unkeyed, the "key" is
// the submission's path and submissions that got no 202 are not resent.
func (c *crashRun) check(t *testing.T, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.unkeyed && len(c.accepted) != n || c.unkeyed && len(c.accepted)+len(c.lost) != n {
		t.Fatalf("%d of %d keys accepted", len(c.accepted), n)
	}
	twice := 0
	for key, ids := range c.accepted {
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("key %s got ids %v: one key must map to one invocation", key, ids)
			}
		}
		id := ids[0]
		if c.runs[id] == 0 {
			t.Fatalf("%s (key %s) got a 202 and never ran", id, key)
		}
		if c.keyOf[id] != key {
			t.Fatalf("%s ran with key %q, submitted with %q", id, c.keyOf[id], key)
		}
		if c.runs[id] > 1 {
			twice++
		}
	}
	for id := range c.runs {
		if ids := c.accepted[c.keyOf[id]]; (len(ids) == 0 || ids[0] != id) && !c.lost[c.keyOf[id]] {
			t.Fatalf("the backend ran %s, which no 202 named", id)
		}
	}
	t.Logf("%d submissions, %d resends (refused/503 while down), %d invocations ran more than once (their attempt reached the backend, the kill came before its success was recorded and acknowledged: redelivered after ack_wait, each with the same Veer-Invocation-Id and Idempotency-Key)",
		n, c.failed.Load(), twice)
}

// TestAsyncCrashGateway: SIGKILL a real veer gateway process (embedded
// JetStream) a third of the way through the submissions under load,
// restart it on the same data dir: every 202'd invocation runs at least
// once, duplicates only under their own idempotency key.
func TestAsyncCrashGateway(t *testing.T) {
	c := newCrashRun(t)
	plain := freeAddr(t)
	c.url = "http://" + plain
	path := c.config(t, plain, t.TempDir(), "")
	killedAt := c.killGatewayMidway(t, path)
	t.Logf("killed after %d 202s", killedAt)
	c.check(t, crashSubmissions)
}

// killGatewayMidway runs "veer gateway --config path" as a process,
// submits crashSubmissions under load, SIGKILLs the gateway a third of the
// way through, restarts it on the same config and data, and waits until the
// submissions are done and every 202'd invocation ran; it returns how many
// 202s had come before the kill.
func (c *crashRun) killGatewayMidway(t *testing.T, path string) int64 {
	t.Helper()
	cmd, lines := veerProcess(t, path)
	waitLogLong(t, lines, "gateway listening")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { c.submit(crashSubmissions, stop); close(done) }()
	for c.got202.Load() < int64(crashSubmissions/3) {
		select {
		case <-c.ran:
		case <-done:
			t.Fatal("submissions ended before the kill")
		case <-time.After(60 * time.Second):
			close(stop)
			t.Fatalf("only %d 202s in 60s", c.got202.Load())
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	killedAt := c.got202.Load()
	_, lines = veerProcess(t, path)
	waitLogLong(t, lines, "gateway listening")
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		close(stop)
		t.Fatalf("submissions not done in 90s after the restart (%d 202s)", c.got202.Load())
	}
	c.waitAllRan(t, 60*time.Second)
	return killedAt
}

// TestAsyncCrashExternalNATS: the same with an external nats-server -js
// process that is SIGKILLed and restarted while the gateway runs: 503s
// meanwhile, then every 202'd invocation runs at least once.
func TestAsyncCrashExternalNATS(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	c := newCrashRun(t)
	plain := freeAddr(t)
	c.url = "http://" + plain
	path := c.config(t, plain, t.TempDir(), ", engine: external, urls: ['"+srv.URL()+"']")
	_, lines := veerProcess(t, path)
	waitLogLong(t, lines, "gateway listening")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { c.submit(crashSubmissions, stop); close(done) }()
	for c.got202.Load() < int64(crashSubmissions/3) {
		select {
		case <-c.ran:
		case <-time.After(60 * time.Second):
			close(stop)
			t.Fatalf("only %d 202s in 60s", c.got202.Load())
		}
	}
	srv.Kill()
	killedAt := c.got202.Load()
	srv.Restart()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		close(stop)
		t.Fatalf("submissions not done in 90s after the restart (%d 202s)", c.got202.Load())
	}
	c.waitAllRan(t, 60*time.Second)
	t.Logf("nats-server killed after %d 202s", killedAt)
	c.check(t, crashSubmissions)
}

// TestAsyncCrashGatewayBatch: the gateway SIGKILL with batch: true and
// submissions without keys (packed, many to a stored message): every 202'd
// invocation still runs at least once after the restart; a submission
// whose answer the kill cut off is not resent (without a key a resend may
// run twice) and is only counted.
func TestAsyncCrashGatewayBatch(t *testing.T) {
	c := newCrashRunKeyed(t, true)
	plain := freeAddr(t)
	c.url = "http://" + plain
	path := c.config(t, plain, t.TempDir(), ", batch: true")
	killedAt := c.killGatewayMidway(t, path)
	c.mu.Lock()
	lost := len(c.lost)
	c.mu.Unlock()
	t.Logf("killed after %d 202s; %d submissions got no answer after being sent (not resent; may or may not have run)", killedAt, lost)
	c.check(t, crashSubmissions)
}

// refused reports whether a client error is a refused connection: the
// request never reached a server, so resending it is safe without a key.
func refused(err error) bool { return err != nil && errors.Is(err, syscall.ECONNREFUSED) }

// waitLogLong is waitLog with a minute's patience: a restarted gateway
// recovers its JetStream store before it listens, and make test runs this
// under -race beside other packages' tests.
func waitLogLong(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("process ended before logging %q", want)
			}
			if strings.Contains(l, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no log line with %q in 60s", want)
		}
	}
}
