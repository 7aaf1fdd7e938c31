package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/internal/must"
	"github.com/veerhq/veer/obs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var errDown = errors.New("auth service down")

// dep is a fake dependency whose answer the test sets.
type dep struct {
	mu    sync.Mutex
	val   string
	err   error
	calls int
}

func (d *dep) load(_ context.Context, key string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.err != nil {
		return "", d.err
	}
	return key + "=" + d.val, nil
}

func (d *dep) set(val string, err error) {
	d.mu.Lock()
	d.val, d.err = val, err
	d.mu.Unlock()
}

func TestStaleOnErrorSteps(t *testing.T) {
	m := clock.NewManual(t0)
	d := &dep{}
	reg := prometheus.NewRegistry()
	c := must.Get(New(Config{TTL: time.Minute, MaxStale: 24 * time.Hour, ErrorBackoff: 5 * time.Second}, d.load, Options{Clock: m, Registerer: reg}))
	steps := []struct {
		at        time.Duration
		val       string
		err       error
		want      string
		status    Status
		wantErr   bool
		wantCalls int
	}{
		{0, "v1", nil, "token=v1", Loaded, false, 1},
		{30 * time.Second, "v2", nil, "token=v1", Fresh, false, 1},   // fresh: no call
		{61 * time.Second, "", errDown, "token=v1", Stale, false, 2}, // expired, load fails: stale
		{62 * time.Second, "", errDown, "token=v1", Stale, false, 2}, // within the error backoff: no call
		{66 * time.Second, "", errDown, "token=v1", Stale, false, 3}, // backoff over: asks again
		{70 * time.Second, "v2", nil, "token=v1", Stale, false, 3},   // still backing off (until 71 s)
		{71 * time.Second, "v2", nil, "token=v2", Loaded, false, 4},  // the dependency is back
		{24*time.Hour + 71*time.Second, "", errDown, "token=v2", Stale, false, 5},
		{24*time.Hour + 77*time.Second, "", errDown, "", Loaded, true, 6}, // older than 24 h: never served
	}
	for i, s := range steps {
		m.RunUntil(t0.Add(s.at))
		d.set(s.val, s.err)
		v, st, err := c.Get(context.Background(), "token")
		if v != s.want || st != s.status || (err != nil) != s.wantErr || d.calls != s.wantCalls {
			t.Fatalf("step %d at %v: (%q, %v, %v) after %d calls; want (%q, %v, err %v) after %d",
				i, s.at, v, st, err, d.calls, s.want, s.status, s.wantErr, s.wantCalls)
		}
		if err != nil && (!errors.Is(err, ErrNoValue) || !errors.Is(err, errDown)) {
			t.Fatalf("step %d: error %v should wrap ErrNoValue and the loader's error", i, err)
		}
	}
	if errs := obs.Lint(reg); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestSingleFlight(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	c := must.Get(New(Config{}, func(ctx context.Context, key string) (string, error) {
		calls.Add(1)
		<-release
		return "v", nil
	}, Options{Registerer: prometheus.NewRegistry()}))
	var wg sync.WaitGroup
	results := make(chan string, 50)
	started := make(chan struct{}, 50)
	for range 50 {
		wg.Go(func() {
			started <- struct{}{}
			v, _, err := c.Get(context.Background(), "k")
			if err != nil {
				t.Error(err)
			}
			results <- v
		})
	}
	// A caller that gives up does not cancel the shared load.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := c.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled caller: %v", err)
	}
	for range 50 {
		<-started
	}
	close(release)
	wg.Wait()
	close(results)
	for v := range results {
		if v != "v" {
			t.Fatalf("got %q", v)
		}
	}
	// Goroutines that reached Get before the load finished shared it; one
	// that arrived after found the fresh value. Either way: one load.
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d loads, want 1", n)
	}
}

func TestBounded(t *testing.T) {
	d := &dep{val: "x"}
	reg := prometheus.NewRegistry()
	c := must.Get(New(Config{MaxEntries: 3}, d.load, Options{Clock: clock.NewManual(t0), Registerer: reg}))
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "a", "d"} { // "a" used again: "b" is the oldest
		c.Get(ctx, k)
	}
	if c.Len() != 3 {
		t.Fatalf("len %d, want 3", c.Len())
	}
	calls := d.calls
	for _, k := range []string{"a", "c", "d"} {
		if _, st, _ := c.Get(ctx, k); st != Fresh {
			t.Fatalf("%s evicted", k)
		}
	}
	if _, st, _ := c.Get(ctx, "b"); st != Loaded || d.calls != calls+1 {
		t.Fatal("b was not the one evicted")
	}
}

func TestInvalidate(t *testing.T) {
	m := clock.NewManual(t0)
	d := &dep{val: "v1"}
	var published []string
	c := must.Get(New(Config{}, d.load, Options{Clock: m, Registerer: prometheus.NewRegistry(), Publish: func(_ context.Context, key string) error {
		published = append(published, key)
		return nil
	}}))
	ctx := context.Background()
	c.Get(ctx, "token")
	c.Invalidate(ctx, "token")
	if fmt.Sprint(published) != "[token]" {
		t.Fatalf("published %v", published)
	}
	// An invalidated value is wrong: it is not served stale either.
	d.set("", errDown)
	if _, _, err := c.Get(ctx, "token"); !errors.Is(err, ErrNoValue) {
		t.Fatalf("after invalidation and a failed load: %v, want ErrNoValue", err)
	}
	// ExpireAll keeps values for stale serving but reloads them.
	d.set("v2", nil)
	c.Get(ctx, "token")
	c.ExpireAll()
	d.set("", errDown)
	if v, st, err := c.Get(ctx, "token"); v != "token=v2" || st != Stale || err != nil {
		t.Fatalf("after ExpireAll and a failed load: %q %v %v", v, st, err)
	}
}

func TestInvalidateDuringLoad(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	c := must.Get(New(Config{}, func(ctx context.Context, key string) (string, error) {
		if first {
			first = false
			close(entered)
			<-release
			return "old", nil
		}
		return "new", nil
	}, Options{Clock: clock.NewManual(t0), Registerer: prometheus.NewRegistry()}))
	done := make(chan string)
	go func() {
		v, _, _ := c.Get(context.Background(), "k")
		done <- v
	}()
	<-entered
	c.InvalidateLocal("k")
	close(release)
	if v := <-done; v != "old" {
		t.Fatalf("waiter got %q", v)
	}
	// The value loaded before the invalidation was not kept.
	if v, st, _ := c.Get(context.Background(), "k"); v != "new" || st != Loaded {
		t.Fatalf("after invalidation during load: %q %v, want a new load", v, st)
	}
}

func FuzzConfig(f *testing.F) {
	f.Add([]byte("ttl: 1m\nmax_stale: 24h\nerror_backoff: 5s\nmax_entries: 100\n"))
	f.Add([]byte(`{"ttl": "1h", "max_stale": "1m"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var cfg Config
		if err := config.Parse(data, "fuzz.yaml", &cfg); err != nil {
			return
		}
		d := cfg.withDefaults()
		if d.MaxStale < d.TTL || d.MaxEntries <= 0 {
			t.Fatalf("defaults broken: %+v", d)
		}
	})
}

func ExampleCache() {
	m := clock.NewManual(t0)
	up := true
	tokens, err := New(Config{TTL: time.Hour, MaxStale: 24 * time.Hour}, func(_ context.Context, user string) (string, error) {
		if !up {
			return "", errors.New("IAM unreachable")
		}
		return "token-for-" + user, nil
	}, Options{Clock: m, Registerer: prometheus.NewRegistry()})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	fmt.Println(tokens.Get(ctx, "alice"))
	up = false
	m.Advance(2 * time.Hour)
	fmt.Println(tokens.Get(ctx, "alice"))
	m.Advance(23 * time.Hour)
	_, _, err = tokens.Get(ctx, "alice")
	fmt.Println(err)
	// Output:
	// token-for-alice loaded <nil>
	// token-for-alice stale <nil>
	// cache: no value to serve
	// IAM unreachable
}
