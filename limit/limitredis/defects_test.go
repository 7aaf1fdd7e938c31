package limitredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/internal/redistest"
	"github.com/veerhq/veer/limit"
)

// TestNewRejectsNilClient: issue 19 defect 3. A nil client used to be
// accepted and the first Admit panicked.
func TestNewRejectsNilClient(t *testing.T) {
	var typedNil *redis.Client
	for _, rdb := range []redis.UniversalClient{nil, typedNil} {
		l, err := New(Config{}, rdb, Options{})
		if l != nil {
			l.Close()
		}
		if !errors.Is(err, ErrNoClient) {
			t.Fatalf("New with client %#v: %v, want ErrNoClient", rdb, err)
		}
	}
}

// TestDimensionsNeverShareKeys: issue 19 defect 1. Keys used to be prefix
// + dimension + ":" + key, so dimension "t" with key "a:b" and dimension
// "t:a" with key "b" were one Redis bucket: one tenant's traffic spent
// another's limit.
func TestDimensionsNeverShareKeys(t *testing.T) {
	srv := redistest.Start(t)
	one := limit.Limits{Rate: 0.001, Burst: 1, Concurrency: 1}
	l, _ := newLimiter(t, Config{Timeout: 5 * time.Second, Limits: limit.Config{Dimensions: []limit.Dimension{
		{Name: "t", Default: one},
		{Name: "t:a", Default: one},
	}}}, srv.Addr(), Options{})
	ctx := context.Background()
	first := l.Admit(ctx, []string{"a:b", ""})
	if !first.Allowed {
		t.Fatal("first request rejected")
	}
	second := l.Admit(ctx, []string{"", "b"})
	if !second.Allowed {
		t.Fatalf("dimension t:a key b was limited by dimension t key a:b: %+v", second)
	}
	if l.InFallback() {
		t.Fatal("decided locally, not through Redis")
	}
	// The keys of one dimension still share: the same request again is
	// limited.
	if again := l.Admit(ctx, []string{"", "b"}); again.Allowed {
		t.Fatal("second request of t:a/b admitted over burst 1")
	}
	first.Permit.Release()
	second.Permit.Release()
}

// TestPrecisionAtHighRates: issue 19 defect 4. The emission interval was
// truncated to whole microseconds (+11% over the limit at 150 000/s, rates
// above 1e6/s capped). The script is fed the same request times as an
// exact GCRA (integer arithmetic in units of 1/rate ns), twice the limit's
// rate for 20 000 requests; the admitted counts must agree within 0.1%.
func TestPrecisionAtHighRates(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv.Addr(), 5*time.Second)
	ctx := context.Background()
	if err := admitScript.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 20000
	const base = int64(1_764_570_000_123_456_789) // ns since the epoch, with sub-second digits
	for _, tc := range []struct {
		rate, burst int64
	}{
		{30_000, 1}, {60_000, 10}, {150_000, 1}, {1_000_000, 1}, {3_000_000, 100}, {300_000_000, 1}, {1_000_000_000, 5},
	} {
		name := fmt.Sprintf("rate=%d,burst=%d", tc.rate, tc.burst)
		l, _ := newLimiter(t, Config{Prefix: name + ":", Timeout: 5 * time.Second, Limits: limit.Config{Dimensions: []limit.Dimension{
			{Name: "tenant", Default: limit.Limits{Rate: float64(tc.rate), Burst: int(tc.burst)}},
		}}}, srv.Addr(), Options{})
		times := make([]int64, n) // ns after base: twice the rate
		for i := range times {
			times[i] = int64(i) * 1e9 / (2 * tc.rate)
		}
		want := exactGCRA(tc.rate, tc.burst, times)
		got := 0
		for i := 0; i < n; {
			pipe := rdb.Pipeline()
			var cmds []*redis.Cmd
			for j := 0; j < 1000 && i < n; i, j = i+1, j+1 {
				var req request
				l.prepare(&req, l.snap.Load(), []string{"acme"})
				keys, args := l.scriptCall(nil, nil, []*request{&req}, strconv.FormatInt(base+times[i], 10))
				cmds = append(cmds, admitScript.EvalSha(ctx, pipe, keys, args...))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			for _, c := range cmds {
				v, err := c.Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				if v[1] == 1 {
					got++
				}
			}
		}
		t.Logf("%s: admitted %d, exact GCRA %d (%+.3f%%)", name, got, want, 100*float64(got-want)/float64(want))
		if d := got - want; d > want/1000+1 || -d > want/1000+1 {
			t.Errorf("%s: admitted %d of %d requests, exact GCRA admits %d", name, got, n, want)
		}
	}
}

// exactGCRA counts the admissions of a GCRA with the given rate (per
// second) and burst for requests at times (ns), in integer arithmetic: time
// is counted in units of 1/rate ns, so the emission interval is exactly 1e9
// units.
func exactGCRA(rate, burst int64, times []int64) int {
	const T = int64(1e9)
	tau := burst * T
	var tat int64
	admitted := 0
	for _, ns := range times {
		now := ns * rate
		nt := max(tat, now) + T
		if nt-now <= tau {
			tat = nt
			admitted++
		}
	}
	return admitted
}

// TestLeaseRenewalSchedule: issue 19 defect 2. Leases must be renewed every
// LeaseTTL/3 whatever the probe interval and however the ticks fall; they
// used to be renewed only on a tick at least TTL/3 after the last renewal,
// which skipped every other one (renewals 2/3 of the TTL apart). On a
// virtual clock, with a probe interval (90 ms) that does not divide TTL/3
// (100 ms), every renewal must happen exactly on schedule and reach Redis.
func TestLeaseRenewalSchedule(t *testing.T) {
	srv := redistest.Start(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewManual(t0)
	var mu sync.Mutex
	var renewals []time.Duration
	testHookRenewed = func(now time.Time) {
		mu.Lock()
		renewals = append(renewals, now.Sub(t0))
		mu.Unlock()
	}
	defer func() { testHookRenewed = nil }()
	const ttl = 300 * time.Millisecond
	l, _ := newLimiter(t, Config{Timeout: 5 * time.Second, LeaseTTL: ttl, ProbeInterval: 90 * time.Millisecond, Limits: limit.Config{Dimensions: []limit.Dimension{
		{Name: "function", Default: limit.Limits{Concurrency: 2}},
	}}}, srv.Addr(), Options{Clock: clk})
	r := l.Admit(context.Background(), []string{"resize"})
	if !r.Allowed {
		t.Fatal("rejected")
	}
	defer r.Permit.Release()
	rdb := client(t, srv.Addr())
	set := l.snap.Load().dims[0].cprefix + "resize"
	score := func() float64 {
		t.Helper()
		zs, err := rdb.ZRangeWithScores(context.Background(), set, 0, -1).Result()
		if err != nil || len(zs) != 1 {
			t.Fatalf("lease set %q: %v %v, want one lease", set, zs, err)
		}
		return zs[0].Score
	}
	before := score()
	for range 300 { // 3 s of virtual time
		clk.Advance(10 * time.Millisecond)
	}
	l.Close() // no renewal runs after Close returns
	mu.Lock()
	got := slices.Clone(renewals)
	mu.Unlock()
	var want []time.Duration
	for k := 1; k <= 30; k++ {
		want = append(want, time.Duration(k)*ttl/3)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("renewals at %v,\nwant every TTL/3: %v", got, want)
	}
	if after := score(); after <= before {
		t.Fatalf("lease expiry %v not pushed past %v: the renewals did not reach Redis", after, before)
	}
	// Past the lease's first expiry, in Redis's terms, the renewed lease
	// still holds its slot: one of the two is left.
	free := 0
	for range 2 {
		if decideAt(t, l, rdb, []string{"resize"}, (int64(before)+1)*1000) {
			free++
		}
	}
	if free != 1 {
		t.Fatalf("after the lease's first expiry: %d slots free, want 1 (the renewed lease holds the other)", free)
	}
}

// decideAt decides keys through l's script at nowNs (ns since the epoch)
// instead of Redis's TIME, and reports admission.
func decideAt(t *testing.T, l *Limiter, rdb *redis.Client, keys []string, nowNs int64) bool {
	t.Helper()
	var req request
	if !l.prepare(&req, l.snap.Load(), keys) {
		t.Fatal("nothing to decide")
	}
	k, args := l.scriptCall(nil, nil, []*request{&req}, strconv.FormatInt(nowNs, 10))
	v, err := admitScript.Run(context.Background(), rdb, k, args...).Int64Slice()
	if err != nil || len(v) != 4 {
		t.Fatalf("script: %v %v", v, err)
	}
	return v[1] == 1
}
