package async

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/obs"
)

// retryStorm: tenant fresh submits one invocation a second for 20 s (100 ms
// attempts, 2 general workers); with storm, tenant storm first submits 40
// whose first attempt fails at once (503) and whose every retry takes 1 s
// and fails. It returns fresh's queueing delays and, for storm, the
// largest number of retry attempts that ran at once, and whether every
// attempt after the first ran in the retry group and none before its
// recorded next attempt.
func retryStorm(t *testing.T, storm bool) (fresh []time.Duration, maxRetrying int, ok bool) {
	synctest.Test(t, func(t *testing.T) {
		l := newRunLog()
		var mu sync.Mutex
		running, ok2 := 0, true
		next := map[string]time.Time{}
		d := DispatcherFunc(func(ctx context.Context, req *http.Request, inv *Invocation) (*http.Response, error) {
			l.mu.Lock()
			l.start[inv.ID] = time.Since(l.t0)
			l.mu.Unlock()
			if inv.Tenant == "fresh" {
				time.Sleep(100 * time.Millisecond)
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
			}
			mu.Lock()
			if at, ok := next[inv.ID]; ok && time.Now().Before(at) {
				ok2 = false // ran before its time
			}
			retry := req.Header.Get(AttemptHeader) != "1"
			if retry {
				if inv.Group != RetryGroup {
					ok2 = false
				}
				running++
				maxRetrying = max(maxRetrying, running)
			}
			mu.Unlock()
			if retry {
				time.Sleep(time.Second)
				mu.Lock()
				running--
				mu.Unlock()
			}
			return &http.Response{StatusCode: 503, Header: http.Header{}, Body: http.NoBody}, nil
		})
		onSt := func(st Status) {
			if st.State == Retrying {
				mu.Lock()
				next[st.ID] = st.NextAttempt
				if st.Group != RetryGroup {
					ok2 = false
				}
				mu.Unlock()
			}
		}
		cfg := Config{Groups: []Group{{Name: DefaultGroup, Concurrency: 2}, {Name: RetryGroup, Concurrency: 1}}}
		s, err := New(cfg, newMemEngine(), d, Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry(), OnStatus: onSt})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		if storm {
			for range 40 {
				l.submitTo(t, s, "storm")
			}
		}
		for range 20 {
			l.submitTo(t, s, "fresh")
			time.Sleep(time.Second)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		fresh = l.delays("fresh")
		if len(fresh) != 20 {
			t.Fatalf("fresh ran %d of 20", len(fresh))
		}
		ok = ok2
	})
	return fresh, maxRetrying, ok
}

// TestRetryGroup: a storm of slow retries does not slow first attempts:
// fresh's p99 queueing delay beside 40 invocations retrying with 1 s
// attempts is within one consumption interval of its delay alone (were the
// retries in the general group, its 2 workers would be held for up to 1 s
// at a time); the retries ran in the retry group, one at a time (its one
// worker), and none before its next-attempt time.
func TestRetryGroup(t *testing.T) {
	alone, _, _ := retryStorm(t, false)
	beside, maxRetrying, ok := retryStorm(t, true)
	if p99(beside) > p99(alone)+DefaultPollInterval {
		t.Fatalf("fresh's p99 %v beside a retry storm, %v alone (delays %v)", p99(beside), p99(alone), beside)
	}
	if maxRetrying != 1 || !ok {
		t.Fatalf("retries: at most %d at once (want 1, the retry group's worker); all in the retry group, none early: %v", maxRetrying, ok)
	}
}

// TestDelayedSubmission: a submission with NotBefore 30 s ahead is in
// the timer group, queued until then, and its attempt starts at 30 s on
// the service's clock (a synctest bubble), not before; one 10 s ahead
// submitted after it starts at 10 s; an undelayed one at once; NotBefore
// beyond MaxDelay is ErrBadDelay.
func TestDelayedSubmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newRunLog()
		s := newSvc(t, Config{MaxDelay: time.Hour}, newMemEngine(), l.dispatcher(0))
		defer s.Close()
		submit := func(after time.Duration) string {
			inv := &Invocation{Tenant: "t", Method: "POST", Host: "h", Path: "/"}
			if after > 0 {
				inv.NotBefore = time.Now().Add(after)
			}
			id, _, err := s.Submit(context.Background(), inv)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]string{true: TimerGroup, false: DefaultGroup}[after > 0]; inv.Group != want {
				t.Fatalf("delay %v: group %s, want %s", after, inv.Group, want)
			}
			return id
		}
		late, soon, now := submit(30*time.Second), submit(10*time.Second), submit(0)
		time.Sleep(29 * time.Second)
		synctest.Wait()
		if st, err := s.Status(context.Background(), "t", late); err != nil || st.State != Queued || st.Group != TimerGroup {
			t.Fatalf("at 29 s: %+v, %v: want queued in the timer group", st, err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		l.mu.Lock()
		got := map[string]time.Duration{"late": l.start[late], "soon": l.start[soon], "now": l.start[now]}
		l.mu.Unlock()
		want := map[string]time.Duration{"late": 30 * time.Second, "soon": 10 * time.Second, "now": 0}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s started at %v, want %v", k, got[k], w)
			}
		}
		_, _, err := s.Submit(context.Background(), &Invocation{Tenant: "t", Method: "POST", Host: "h", Path: "/", NotBefore: time.Now().Add(2 * time.Hour)})
		if !errors.Is(err, ErrBadDelay) {
			t.Fatalf("2 h ahead with max_delay 1h: %v, want ErrBadDelay", err)
		}
	})
}

// TestParseDelaySteps: the delay headers, row by row.
func TestParseDelaySteps(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	rows := []struct {
		name   string
		header http.Header
		want   time.Time // zero: no delay
		bad    bool
	}{
		{"none", http.Header{}, time.Time{}, false},
		{"duration", http.Header{DelayHeader: {"30s"}}, now.Add(30 * time.Second), false},
		{"seconds", http.Header{DelayHeader: {"90"}}, now.Add(90 * time.Second), false},
		{"zero", http.Header{DelayHeader: {"0s"}}, time.Time{}, false},
		{"at max", http.Header{DelayHeader: {"1h"}}, now.Add(time.Hour), false},
		{"beyond max", http.Header{DelayHeader: {"61m"}}, time.Time{}, true},
		{"negative", http.Header{DelayHeader: {"-5s"}}, time.Time{}, true},
		{"garbage", http.Header{DelayHeader: {"soon"}}, time.Time{}, true},
		{"twice", http.Header{DelayHeader: {"1s", "2s"}}, time.Time{}, true},
		{"not before", http.Header{NotBeforeHeader: {"2026-12-02T06:10:00Z"}}, now.Add(10 * time.Minute), false},
		{"not before, offset", http.Header{NotBeforeHeader: {"2026-12-02T07:10:00+01:00"}}, now.Add(10 * time.Minute), false},
		{"not before, past", http.Header{NotBeforeHeader: {"2026-12-01T06:00:00Z"}}, time.Time{}, false},
		{"not before, beyond max", http.Header{NotBeforeHeader: {"2026-12-02T08:00:00Z"}}, time.Time{}, true},
		{"not before, not RFC 3339", http.Header{NotBeforeHeader: {"Wed, 02 Dec 2026 06:10:00 GMT"}}, time.Time{}, true},
		{"both", http.Header{DelayHeader: {"1s"}, NotBeforeHeader: {"2026-12-02T06:10:00Z"}}, time.Time{}, true},
	}
	for _, r := range rows {
		got, err := ParseDelay(r.header, now, time.Hour)
		if (err != nil) != r.bad || (err != nil && !errors.Is(err, ErrBadDelay)) || !got.Equal(r.want) {
			t.Errorf("%s: ParseDelay = %v, %v; want %v, bad %v", r.name, got, err, r.want, r.bad)
		}
	}
}
