package async

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/retry"
)

func TestBackoffIsRetryAsync(t *testing.T) {
	p := retry.Async()
	if p.Initial != ScheduleInitial || p.Multiplier != ScheduleMultiplier || p.MaxWait != ScheduleMaxWait || p.Deadline != ScheduleDeadline {
		t.Fatalf("retry.Async() = %+v; async's schedule constants differ", p)
	}
	for n := 1; n <= 40; n++ {
		if got, want := Backoff(n), p.Base(n); got != want {
			t.Errorf("Backoff(%d) = %v, retry.Async().Base = %v", n, got, want)
		}
	}
}

// TestScheduleOnVirtualClock drives Decide through the whole schedule on
// clock.Manual, every attempt failing at once with a 503: 26 waits, the
// last attempt at 21 246 s, then failure (the dead letter).
func TestScheduleOnVirtualClock(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	first := clk.Now()
	var waits []time.Duration
	var starts []time.Duration
	o := outcome.Outcome{Kind: outcome.Overloaded, Status: 503}
	for n := 1; ; n++ {
		starts = append(starts, clk.Since(first))
		d := Decide(n, first, clk.Now(), o)
		if d.State == Failed {
			if !strings.Contains(d.Reason, "503") || !strings.Contains(d.Reason, "exhausted") {
				t.Errorf("final reason %q", d.Reason)
			}
			break
		}
		if d.State != Retrying {
			t.Fatalf("attempt %d: %v", n, d.State)
		}
		waits = append(waits, d.Wait)
		clk.Advance(d.Wait)
	}
	if len(waits) != 26 {
		t.Fatalf("%d waits, want 26: %v", len(waits), waits)
	}
	if last := starts[len(starts)-1]; last != 21246*time.Second {
		t.Fatalf("last attempt at %v, want 21246s", last)
	}
	if !slices.Equal(waits, retry.Async().Schedule()) {
		t.Fatalf("waits %v, want retry.Async().Schedule() %v", waits, retry.Async().Schedule())
	}
}

// TestDecideSteps: Retry-After, 4xx and the deadline, as a step table.
func TestDecideSteps(t *testing.T) {
	t0 := time.Unix(0, 0)
	refused := outcome.Outcome{Kind: outcome.ClassifyError(syscall.ECONNREFUSED), Err: syscall.ECONNREFUSED}
	tests := []struct {
		name    string
		n       int
		elapsed time.Duration // from the first attempt to this one's end
		o       outcome.Outcome
		state   State
		wait    time.Duration
	}{
		{"200 succeeds", 1, 0, outcome.Outcome{Kind: outcome.Success, Status: 200}, Succeeded, 0},
		{"202 succeeds", 3, 0, outcome.Outcome{Kind: outcome.Success, Status: 202}, Succeeded, 0},
		{"400 fails at once", 1, 0, outcome.Outcome{Kind: outcome.ClientError, Status: 400}, Failed, 0},
		{"404 fails at once", 5, 0, outcome.Outcome{Kind: outcome.ClientError, Status: 404}, Failed, 0},
		{"409 fails at once", 1, 0, outcome.Outcome{Kind: outcome.ClientError, Status: 409}, Failed, 0},
		{"429 retries on the schedule", 1, 0, outcome.Outcome{Kind: outcome.Limited, Status: 429}, Retrying, 2 * time.Second},
		{"500 retries", 2, 2 * time.Second, outcome.Outcome{Kind: outcome.ServerError, Status: 500}, Retrying, 4 * time.Second},
		{"502 retries", 3, 6 * time.Second, outcome.Outcome{Kind: outcome.ServerError, Status: 502}, Retrying, 8 * time.Second},
		{"connection refused retries", 1, 0, refused, Retrying, 2 * time.Second},
		{"timeout retries", 4, 14 * time.Second, outcome.Outcome{Kind: outcome.ResponseTimeout}, Retrying, 16 * time.Second},
		{"longer Retry-After is honoured", 1, 0, outcome.Outcome{Kind: outcome.Overloaded, Status: 503, RetryAfter: 90 * time.Second}, Retrying, 90 * time.Second},
		{"longer Retry-After on 429", 2, 2 * time.Second, outcome.Outcome{Kind: outcome.Limited, Status: 429, RetryAfter: 30 * time.Second}, Retrying, 30 * time.Second},
		{"shorter Retry-After: the schedule", 4, 14 * time.Second, outcome.Outcome{Kind: outcome.Overloaded, Status: 503, RetryAfter: time.Second}, Retrying, 16 * time.Second},
		{"wait capped at 20 min", 12, 2046*time.Second + 1200*time.Second, outcome.Outcome{Kind: outcome.ServerError, Status: 500}, Retrying, 20 * time.Minute},
		{"Retry-After past the 6 h deadline fails", 3, 5 * time.Hour, outcome.Outcome{Kind: outcome.Overloaded, Status: 503, RetryAfter: 2 * time.Hour}, Failed, 0},
		{"next wait past the deadline fails", 27, 21246 * time.Second, outcome.Outcome{Kind: outcome.ServerError, Status: 500}, Failed, 0},
		{"last wait inside the deadline", 26, 20046 * time.Second, outcome.Outcome{Kind: outcome.ServerError, Status: 500}, Retrying, 20 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.n, t0, t0.Add(tt.elapsed), tt.o)
			if d.State != tt.state || d.Wait != tt.wait {
				t.Fatalf("Decide = %v after %v (%q), want %v after %v", d.State, d.Wait, d.Reason, tt.state, tt.wait)
			}
			if d.State != Succeeded && d.Reason == "" {
				t.Fatal("no reason")
			}
		})
	}
}

// TestScheduleThroughWorkers runs the whole schedule through a Service's
// worker in a synctest bubble: every attempt answers 503, the worker
// records retrying with the next attempt time, and after the 27th attempt
// (21 246 s after the first) the invocation is dead-lettered as failed.
func TestScheduleThroughWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newMemEngine()
		var mu sync.Mutex
		var at []time.Time
		d := DispatcherFunc(func(ctx context.Context, req *http.Request, inv *Invocation) (*http.Response, error) {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
			if req.Header.Get(IDHeader) != inv.ID {
				return nil, errors.New("no invocation id upstream")
			}
			return &http.Response{StatusCode: 503, Header: http.Header{}, Body: http.NoBody}, nil
		})
		var sts []Status
		s, err := New(Config{PollInterval: time.Hour, Groups: []Group{{Name: DefaultGroup, Concurrency: 1}}}, eng, d,
			Options{Logger: obs.Discard, Registerer: prometheus.NewRegistry(), OnStatus: func(st Status) { mu.Lock(); sts = append(sts, st); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		id, _, err := s.Submit(context.Background(), &Invocation{Tenant: "t", Method: "POST", Host: "h", Path: "/"})
		if err != nil {
			t.Fatal(err)
		}
		dead := <-eng.dead
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if dead.ID != id || dead.State != Failed || dead.Attempts != 27 || dead.UpstreamStatus != 503 {
			t.Fatalf("dead letter %+v", dead)
		}
		if len(at) != 27 {
			t.Fatalf("%d attempts, want 27", len(at))
		}
		if last := at[26].Sub(at[0]); last != 21246*time.Second {
			t.Fatalf("last attempt %v after the first, want 21246s", last)
		}
		// the statuses recorded: running, retrying (with its next attempt
		// time) ... running, failed
		var retrying int
		for _, st := range sts {
			if st.State == Retrying {
				retrying++
				if st.NextAttempt.Sub(st.Updated) != Backoff(st.Attempts) {
					t.Errorf("attempt %d: next attempt %v after it, want %v", st.Attempts, st.NextAttempt.Sub(st.Updated), Backoff(st.Attempts))
				}
			}
		}
		if retrying != 26 || sts[len(sts)-1].State != Failed {
			t.Fatalf("%d retrying statuses, last %v", retrying, sts[len(sts)-1].State)
		}
		got, err := s.Status(context.Background(), "t", id)
		if err != nil || got.State != Failed || !strings.Contains(got.Reason, "503") {
			t.Fatalf("Status = %+v, %v", got, err)
		}
	})
}
