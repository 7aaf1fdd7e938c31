package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/internal/metrictest"
	"github.com/veerhq/veer/internal/must"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestAsyncSchedule(t *testing.T) {
	s := time.Second
	want := []time.Duration{2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 64 * s, 128 * s, 256 * s, 512 * s, 1024 * s}
	for range 16 {
		want = append(want, 20*time.Minute)
	}
	got := Async().Schedule()
	if len(got) != 26 {
		t.Fatalf("Async schedule has %d retries, want 26: %v", len(got), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("wait %d = %v, want %v", i+1, got[i], want[i])
		}
	}

	// The same schedule through a Call on a manual clock: every attempt
	// fails at once; the 27th failure is final, 21 246 s after the start.
	m := clock.NewManual(t0)
	r := must.Get(New(Async(), Options{Clock: m, Registerer: prometheus.NewRegistry()}))
	c := r.Start(true)
	var attempts []time.Duration
	for {
		attempts = append(attempts, m.Since(t0))
		wait, err := c.Next(outcome.Of(outcome.ConnectRefused))
		if err != nil {
			if !errors.Is(err, ErrDeadline) {
				t.Fatalf("stopped with %v, want ErrDeadline", err)
			}
			break
		}
		m.Advance(wait)
	}
	if len(attempts) != 27 {
		t.Fatalf("%d attempts, want 27", len(attempts))
	}
	if last := attempts[26]; last != 21246*time.Second {
		t.Fatalf("last attempt at %v, want 21246s (5h54m6s)", last)
	}
	if attempts[10] != 2046*time.Second || attempts[11] != 3246*time.Second {
		t.Fatalf("attempts 11, 12 at %v, %v; want 2046s, 3246s", attempts[10], attempts[11])
	}
}

func TestBackoffFullJitter(t *testing.T) {
	p := Config{Initial: 100 * time.Millisecond, MaxWait: time.Second}
	cases := []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{1, 0.5, 50 * time.Millisecond},
		{2, 0.5, 100 * time.Millisecond},
		{3, 0.25, 100 * time.Millisecond},
		{4, 0.999, 799200 * time.Microsecond},
		{5, 0.5, 500 * time.Millisecond}, // base 1.6 s capped at 1 s
		{60, 0.5, 500 * time.Millisecond},
		{1000, 0, 0},
	}
	for _, c := range cases {
		if got := p.Backoff(c.n, c.u); got != c.want {
			t.Errorf("Backoff(%d, %v) = %v, want %v", c.n, c.u, got, c.want)
		}
	}
}

func TestNextRules(t *testing.T) {
	post502 := outcome.Outcome{Kind: outcome.ServerError, Status: 502}
	cases := []struct {
		name       string
		idempotent bool
		attempts   int // failed attempts before this one
		o          outcome.Outcome
		wantWait   time.Duration
		wantErr    error
	}{
		{"connect refused, POST", false, 0, outcome.Of(outcome.ConnectRefused), 50 * time.Millisecond, nil},
		{"dns failure, POST", false, 0, outcome.Of(outcome.DNSTimeout), 50 * time.Millisecond, nil},
		{"503 shed, POST", false, 0, outcome.Outcome{Kind: outcome.Overloaded, Status: 503}, 50 * time.Millisecond, nil},
		{"reset after send, POST", false, 0, outcome.Of(outcome.ConnectionReset), 0, ErrUnsafe},
		{"timeout, POST", false, 0, outcome.Of(outcome.ResponseTimeout), 0, ErrUnsafe},
		{"502, POST", false, 0, post502, 0, ErrUnsafe},
		{"502, GET", true, 0, post502, 50 * time.Millisecond, nil},
		{"500, GET", true, 0, outcome.Outcome{Kind: outcome.ServerError, Status: 500}, 0, ErrNotRetryable},
		{"404, GET", true, 0, outcome.Outcome{Kind: outcome.ClientError, Status: 404}, 0, ErrNotRetryable},
		{"canceled", true, 0, outcome.Of(outcome.ClientCanceled), 0, ErrNotRetryable},
		{"third attempt", true, 2, outcome.Of(outcome.ConnectRefused), 0, ErrAttempts},
		{"second retry", true, 1, outcome.Of(outcome.ConnectRefused), 100 * time.Millisecond, nil},
		{"429 Retry-After 3s", true, 0, outcome.Outcome{Kind: outcome.Limited, Status: 429, RetryAfter: 3 * time.Second}, 3 * time.Second, nil},
		{"429 Retry-After 11s", true, 0, outcome.Outcome{Kind: outcome.Limited, Status: 429, RetryAfter: 11 * time.Second}, 0, ErrRetryAfter},
		{"success", false, 0, outcome.Of(outcome.Success), 0, nil},
	}
	for _, c := range cases {
		r := must.Get(New(Config{}, Options{Rand: func() float64 { return 0.5 }, Clock: clock.NewManual(t0), Registerer: prometheus.NewRegistry()}))
		call := r.StartAt(t0, c.idempotent)
		for range c.attempts {
			if _, err := call.NextAt(t0, outcome.Of(outcome.ConnectRefused)); err != nil {
				t.Fatal(err)
			}
		}
		wait, err := call.NextAt(t0, c.o)
		if wait != c.wantWait || !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
			t.Errorf("%s: (%v, %v), want (%v, %v)", c.name, wait, err, c.wantWait, c.wantErr)
		}
	}
}

func TestDeadline(t *testing.T) {
	r := must.Get(New(Config{MaxAttempts: 10, Initial: time.Second, NoJitter: true, Deadline: 5 * time.Second}, Options{Registerer: prometheus.NewRegistry()}))
	c := r.StartAt(t0, true)
	now := t0
	var waits []time.Duration
	for {
		w, err := c.NextAt(now, outcome.Of(outcome.ConnectRefused))
		if err != nil {
			if !errors.Is(err, ErrDeadline) {
				t.Fatal(err)
			}
			break
		}
		waits = append(waits, w)
		now = now.Add(w)
	}
	// 1 + 2 = 3 s; the next wait (4 s) would start the attempt at 7 s > 5 s.
	if fmt.Sprint(waits) != "[1s 2s]" {
		t.Fatalf("waits %v, want [1s 2s]", waits)
	}
}

func TestBudgetStopsStorm(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := must.Get(NewBudget(BudgetConfig{}))
	r := must.Get(New(Config{MaxAttempts: 5}, Options{Budget: b, Registerer: reg, Clock: clock.NewManual(t0)}))
	// A quiet client: 2 requests may still use 3 retries in the interval.
	got := storm(r, t0, 2)
	if got != 3 {
		t.Fatalf("quiet client: %d retries, want the minimum 3", got)
	}
	// A storm 20 s later (fresh window): 1000 requests all failing, each
	// wanting 4 retries; the budget allows 20 % of 1000 = 200 retries, not 4000.
	got = storm(r, t0.Add(20*time.Second), 1000)
	if got != 200 {
		t.Fatalf("storm: %d retries, want 200", got)
	}
	if got := metrictest.Sum(t, reg, "veer_retry_giveups_total", nil); got == 0 {
		t.Fatal("no give-ups counted")
	}
	if errs := obs.Lint(reg); len(errs) > 0 {
		t.Fatal(errs)
	}
}

// storm starts n requests at now (all counted first, as in a steady stream)
// and retries each until the policy stops it; it returns retries granted.
func storm(r *Retrier, now time.Time, n int) int {
	calls := make([]*Call, n)
	for i := range calls {
		calls[i] = r.StartAt(now, true)
	}
	retries := 0
	for _, c := range calls {
		for {
			if _, err := c.NextAt(now, outcome.Of(outcome.ConnectRefused)); err != nil {
				break
			}
			retries++
		}
	}
	return retries
}

func TestDoWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := must.Get(New(Config{MaxAttempts: 4, Initial: time.Second}, Options{Rand: func() float64 { return 0.5 }, Registerer: prometheus.NewRegistry()}))
		start := time.Now()
		var calls []time.Duration
		o, err := r.Do(t.Context(), true, func(context.Context) outcome.Outcome {
			calls = append(calls, time.Since(start))
			if len(calls) < 3 {
				return outcome.Of(outcome.ConnectionReset)
			}
			return outcome.Of(outcome.Success)
		})
		if err != nil || !o.OK() {
			t.Fatalf("Do = %v, %v", o, err)
		}
		// Waits: 0.5·1 s, then 0.5·2 s.
		if fmt.Sprint(calls) != "[0s 500ms 1.5s]" {
			t.Fatalf("attempts at %v", calls)
		}
	})
}

func TestDoContextCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := must.Get(New(Config{Initial: time.Hour, MaxWait: time.Hour, NoJitter: true}, Options{Registerer: prometheus.NewRegistry()}))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err := r.Do(ctx, true, func(context.Context) outcome.Outcome { return outcome.Of(outcome.ConnectRefused) })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want deadline exceeded", err)
		}
	})
}

func TestTransient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timeout := &net.OpError{Op: "read", Net: "tcp", Err: &timeoutErr{}}
		cases := []struct {
			name      string
			errs      []error
			wantCalls int
			wantErr   error
		}{
			{"EOF then ok", []error{io.EOF, io.EOF, nil}, 3, nil},
			{"i/o timeout then ok", []error{timeout, nil}, 2, nil},
			{"EOF forever", []error{io.EOF, io.EOF, io.EOF, io.EOF, io.EOF}, 4, io.EOF},
			{"other error", []error{errNotTransient, nil}, 1, errNotTransient},
		}
		for _, c := range cases {
			calls := 0
			start := time.Now()
			err := Transient{Sleep: time.Second}.Do(t.Context(), func(context.Context) error {
				calls++
				return c.errs[calls-1]
			})
			if calls != c.wantCalls || !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Errorf("%s: %d calls, err %v; want %d, %v", c.name, calls, err, c.wantCalls, c.wantErr)
			}
			if slept := time.Since(start); slept != time.Duration(calls-1)*time.Second {
				t.Errorf("%s: slept %v", c.name, slept)
			}
		}
	})
}

var errNotTransient = errors.New("permission denied")

type timeoutErr struct{}

func (*timeoutErr) Error() string   { return "i/o timeout" }
func (*timeoutErr) Timeout() bool   { return true }
func (*timeoutErr) Temporary() bool { return true }

func TestTransport(t *testing.T) {
	var n atomic.Int32
	var bodies []string
	fail := 2
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		if int(n.Add(1)) <= fail {
			w.WriteHeader(status)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	client := &http.Client{Transport: &Transport{
		Next:    srv.Client().Transport,
		Retrier: must.Get(New(Config{Initial: time.Millisecond, MaxWait: time.Millisecond}, Options{Registerer: prometheus.NewRegistry()})),
	}}
	post := func(hdr string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("payload"))
		if hdr != "" {
			req.Header.Set(IdempotencyKeyHeader, hdr)
		}
		return client.Do(req)
	}
	cases := []struct {
		name       string
		status     int
		fail       int
		key        string
		wantStatus int
		wantCalls  int
	}{
		{"POST 503 twice: shed, never processed, retried", 503, 2, "", 200, 3},
		{"POST 502: may have been processed, not retried", 502, 1, "", 502, 1},
		{"POST 502 with Idempotency-Key: retried", 502, 1, "k1", 200, 2},
		{"POST 503 three times: attempts exhausted", 503, 3, "", 503, 3},
	}
	for _, c := range cases {
		n.Store(0)
		bodies = nil
		fail, status = c.fail, c.status
		resp, err := post(c.key)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.wantStatus || int(n.Load()) != c.wantCalls {
			t.Errorf("%s: status %d after %d calls, want %d after %d", c.name, resp.StatusCode, n.Load(), c.wantStatus, c.wantCalls)
		}
		for i, b := range bodies {
			if b != "payload" {
				t.Errorf("%s: attempt %d body %q, want replayed payload", c.name, i+1, b)
			}
		}
	}
}

func TestTransportConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a closed port: real ECONNREFUSED
	client := &http.Client{Transport: &Transport{
		Next:    &http.Transport{},
		Retrier: must.Get(New(Config{Initial: time.Millisecond, MaxWait: time.Millisecond}, Options{Registerer: prometheus.NewRegistry()})),
	}}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr, strings.NewReader("x"))
	_, err = client.Do(req)
	if outcome.ClassifyError(err) != outcome.ConnectRefused {
		t.Fatalf("err %v, want connect refused after retries", err)
	}
}

func FuzzPolicy(f *testing.F) {
	f.Add([]byte("max_attempts: 5\ninitial: 200ms\nmultiplier: 1.5\nmax_wait: 5s\ndeadline: 30s\n"))
	f.Add([]byte(`{"max_attempts": -1, "deadline": "6h", "no_jitter": true}`))
	f.Add([]byte("ratio: 0.2\nmin_retries: 3\ninterval: 10s\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Config
		if err := config.Parse(data, "fuzz.yaml", &p); err == nil {
			s := p.Schedule()
			for _, w := range s {
				if w < 0 || w > p.withDefaults().MaxWait {
					t.Fatalf("wait %v outside [0, MaxWait]", w)
				}
			}
		}
		var b BudgetConfig
		if err := config.Parse(data, "fuzz.yaml", &b); err == nil {
			must.Get(NewBudget(b)).TryRetryAt(t0)
		}
	})
}

func ExampleConfig_Schedule() {
	var total time.Duration
	s := Async().Schedule()
	for _, w := range s {
		total += w
	}
	fmt.Println(len(s), "retries:", s[:11], "…")
	fmt.Println("last attempt after", total)
	// Output:
	// 26 retries: [2s 4s 8s 16s 32s 1m4s 2m8s 4m16s 8m32s 17m4s 20m0s] …
	// last attempt after 5h54m6s
}
