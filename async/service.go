package async

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

// Upstream headers of an attempt.
const (
	IDHeader       = "Veer-Invocation-Id"
	AttemptHeader  = "Veer-Attempt"
	KeyHeader      = "Idempotency-Key"
	CallbackHeader = "Veer-Callback"
)

// Dispatcher sends one attempt of an invocation upstream: the gateway's
// own cluster dispatch (health, ejection, breakers, cross-cluster retry).
// It must honour ctx.
type Dispatcher interface {
	Dispatch(ctx context.Context, req *http.Request, inv *Invocation) (*http.Response, error)
}

// DispatcherFunc adapts a function to Dispatcher.
type DispatcherFunc func(ctx context.Context, req *http.Request, inv *Invocation) (*http.Response, error)

// Dispatch calls f.
func (f DispatcherFunc) Dispatch(ctx context.Context, req *http.Request, inv *Invocation) (*http.Response, error) {
	return f(ctx, req, inv)
}

// Options are the run-time wiring of a Service. The zero value works.
type Options struct {
	// Clock: default clock.Real.
	Clock clock.Clock
	// Logger: default slog.Default().
	Logger *slog.Logger
	// Registerer: default prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
	// Callback posts results to callback URLs; default a client with a
	// 5 s timeout.
	Callback *http.Client
	// OnStatus, if set, is called after each status a worker records
	// (running, retrying, succeeded, failed), on the worker's goroutine;
	// it must not block.
	OnStatus func(Status)
}

// Service accepts invocations into an Engine and runs them with its
// groups' workers through a Dispatcher.
type Service struct {
	cfg    Config
	eng    Engine
	d      Dispatcher
	clk    clock.Clock
	log    *slog.Logger
	m      *metrics
	cb     *http.Client
	onSt   func(Status)
	group  map[string]string // dedicated tenant -> group
	scheds map[string]*scheduler
	pmu    sync.RWMutex
	pauses map[string]bool // "g:" + group or "t:" + tenant, as the engine last said
	pgen   uint64          // pause writes by this process
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// New validates cfg and builds a service over eng. Start runs its workers.
func New(cfg Config, eng Engine, d Dispatcher, opts Options) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if eng == nil || d == nil {
		return nil, errors.New("async: New needs an engine and a dispatcher")
	}
	c := cfg.withDefaults()
	reg := opts.Registerer
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	s := &Service{cfg: c, eng: eng, d: d, clk: clock.Or(opts.Clock), log: obs.LoggerOr(opts.Logger),
		m: newMetrics(reg, c.MetricTenants), cb: opts.Callback, onSt: opts.OnStatus, group: map[string]string{}}
	if s.onSt == nil {
		s.onSt = func(Status) {}
	}
	if s.cb == nil {
		s.cb = &http.Client{Timeout: 5 * time.Second}
	}
	s.scheds, s.pauses = map[string]*scheduler{}, map[string]bool{}
	for _, g := range c.Groups {
		for _, t := range g.Tenants {
			s.group[t] = g.Name
		}
		s.scheds[g.Name] = newScheduler(s, g)
		// the finished series exist from the start (at 0), so that a rate
		// over them, or a dashboard panel, reads 0 rather than nothing
		for _, st := range []State{Succeeded, Failed} {
			s.m.done.WithLabelValues(g.Name, string(st))
		}
	}
	if r, ok := eng.(interface{ OnReady(func(group string)) }); ok {
		r.OnReady(func(group string) {
			if sc := s.scheds[group]; sc != nil {
				sc.notify()
			}
		})
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := reg.Register(newDepthCollector(s)); err != nil {
		s.log.Warn("async: depth metrics not registered", "err", err)
	}
	return s, nil
}

// Config returns the config in force, with defaults.
func (s *Service) Config() Config { return s.cfg }

// Start runs every group's scheduler and workers until Close.
func (s *Service) Start() {
	s.refreshPauses(s.ctx) // a restart honours the pauses before its first fetch
	s.wg.Go(s.watchPauses)
	for _, sc := range s.scheds {
		s.wg.Go(func() { sc.run(s.ctx, &s.wg) })
	}
}

// Close stops the workers (an attempt in flight is cancelled and its
// invocation delivered again later) and then closes the engine.
func (s *Service) Close() error {
	var err error
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
		err = s.eng.Close()
	})
	return err
}

// GroupOf returns the group that runs tenant's invocations.
func (s *Service) GroupOf(tenant string) string {
	if g, ok := s.group[tenant]; ok {
		return g
	}
	return DefaultGroup
}

// Submit stores inv durably and returns its id; existing is true when
// inv.Key repeats an earlier submission of the tenant (whose id is
// returned, nothing stored). inv.Group is set from the tenant.
func (s *Service) Submit(ctx context.Context, inv *Invocation) (id string, existing bool, err error) {
	if s.ctx.Err() != nil {
		return "", false, ErrClosed
	}
	if int64(len(inv.Body)) > s.cfg.MaxBody {
		return "", false, ErrTooLarge
	}
	inv.Group = s.GroupOf(inv.Tenant)
	if inv.Submitted.IsZero() {
		inv.Submitted = s.clk.Now()
	}
	if !inv.NotBefore.IsZero() {
		if inv.NotBefore.Sub(inv.Submitted) > s.cfg.MaxDelay {
			return "", false, ErrBadDelay
		}
		if inv.NotBefore.After(inv.Submitted) {
			inv.Group = TimerGroup
		} else {
			inv.NotBefore = time.Time{}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SubmitTimeout)
	defer cancel()
	start := time.Now()
	id, existing, err = s.eng.Enqueue(ctx, inv)
	s.m.submitted(inv.Tenant, err, existing, time.Since(start))
	if err == nil && !existing {
		s.scheds[inv.Group].notify()
	}
	return id, existing, err
}

// Status returns the status of tenant's invocation id, or ErrNotFound
// (also for another tenant's id) or ErrBadID.
func (s *Service) Status(ctx context.Context, tenant, id string) (Status, error) {
	if _, _, err := ParseID(id); err != nil {
		return Status{}, err
	}
	st, found, err := s.eng.Status(ctx, id)
	if err != nil {
		return Status{}, err
	}
	if found {
		if st.Tenant != tenant {
			return Status{}, ErrNotFound
		}
		return st, nil
	}
	inv, err := s.eng.Lookup(ctx, id)
	if err != nil {
		return Status{}, err
	}
	if inv.Tenant != tenant {
		return Status{}, ErrNotFound
	}
	return Status{ID: inv.ID, Tenant: inv.Tenant, Group: inv.Group, State: Queued, Submitted: inv.Submitted}, nil
}

// List returns a page of tenant's invocations with their status.
func (s *Service) List(ctx context.Context, tenant string, cursor uint64, limit int) ([]Status, uint64, error) {
	invs, next, err := s.eng.List(ctx, tenant, cursor, limit)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Status, 0, len(invs))
	for _, inv := range invs {
		st, found, err := s.eng.Status(ctx, inv.ID)
		if err != nil {
			return nil, 0, err
		}
		if !found {
			st = Status{ID: inv.ID, Tenant: inv.Tenant, Group: inv.Group, State: Queued, Submitted: inv.Submitted}
		}
		out = append(out, st)
	}
	return out, next, nil
}

// run makes one attempt of a delivered invocation and records what
// follows. The status is written before the delivery is acknowledged, so
// a crash in between only delivers it again, and the redelivery sees the
// final state and acknowledges.
func (s *Service) run(group string, d Delivery) {
	inv := d.Invocation()
	ctx := s.ctx
	st, found, err := s.eng.Status(ctx, inv.ID)
	if err != nil {
		s.log.Warn("async: status read failed; delivering again later", "id", inv.ID, "err", err)
		_ = d.Retry(time.Second)
		return
	}
	now := s.clk.Now()
	if !found {
		st = Status{ID: inv.ID, Tenant: inv.Tenant, Group: inv.Group, State: Queued, Submitted: inv.Submitted}
	}
	switch {
	case st.State.Final():
		_ = d.Ack()
		return
	case st.State == Running && now.Sub(st.Updated) < s.cfg.AckWait:
		// a second copy of an invocation that runs elsewhere right now (a
		// pack distributed twice after a crash): an abandoned attempt is
		// redelivered only after AckWait without progress, so wait that long
		_ = d.Retry(s.cfg.AckWait)
		return
	case st.State == Retrying && st.Group == RetryGroup && group != RetryGroup:
		// the delivery its retry was moved from, not acknowledged (a crash
		// in between): move it again (the engine stores it once) and ack
		if s.moveToRetry(ctx, inv, st) {
			_ = d.Ack()
		} else {
			_ = d.Retry(time.Second)
		}
		return
	case st.State == Retrying && now.Before(st.NextAttempt):
		_ = d.Retry(st.NextAttempt.Sub(now)) // delivered early (a restart): wait for its time
		s.scheds[group].wakeAfter(st.NextAttempt.Sub(now))
		return
	case now.Before(inv.NotBefore):
		// a delayed submission, or a retry, fetched before its time: it
		// becomes visible again then, and this process looks at once
		_ = d.Retry(inv.NotBefore.Sub(now))
		s.scheds[group].wakeAfter(inv.NotBefore.Sub(now))
		return
	}
	st.Attempts++
	if st.FirstAttempt.IsZero() {
		st.FirstAttempt = now
		s.m.queueDelay.WithLabelValues(group).Observe(now.Sub(inv.Submitted).Seconds())
	}
	st.State, st.NextAttempt, st.Updated = Running, time.Time{}, now
	if err := s.eng.SetStatus(ctx, st); err != nil {
		s.log.Warn("async: status write failed; delivering again later", "id", inv.ID, "err", err)
		_ = d.Retry(time.Second)
		return
	}
	s.onSt(st)
	o := s.attempt(ctx, d, inv, st.Attempts)
	if ctx.Err() != nil {
		// shutting down: not the invocation's fault; another worker takes
		// it at once (the status says so, so it is not taken for a copy
		// running elsewhere)
		st.State, st.NextAttempt, st.Reason, st.Updated = Retrying, s.clk.Now(), "interrupted: gateway shutting down", s.clk.Now()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.eng.SetStatus(sctx, st)
		cancel()
		_ = d.Retry(0)
		return
	}
	end := s.clk.Now()
	s.m.attempts.WithLabelValues(group, o.Kind.String()).Inc()
	dec := Decide(st.Attempts, st.FirstAttempt, end, o)
	st.State, st.UpstreamStatus, st.Reason, st.Updated = dec.State, o.Status, dec.Reason, end
	switch dec.State {
	case Succeeded:
		if s.finish(ctx, d, st) {
			s.m.done.WithLabelValues(group, string(Succeeded)).Inc()
			s.m.e2e.WithLabelValues(group).Observe(end.Sub(inv.Submitted).Seconds())
			s.m.top.use(inv.Tenant, func(l string) { s.m.tenantE2E.WithLabelValues(l).Observe(end.Sub(inv.Submitted).Seconds()) })
			s.callback(inv, st)
		}
	case Retrying:
		// the next attempt runs in the retry group (its own workers), so
		// that a storm of retries never holds the workers of first
		// attempts: the status says so first, then the retry is stored
		// there, then this delivery is acknowledged
		st.NextAttempt, st.Group = end.Add(dec.Wait), RetryGroup
		if err := s.eng.SetStatus(ctx, st); err != nil {
			s.log.Warn("async: status write failed", "id", inv.ID, "err", err)
		}
		s.onSt(st)
		s.m.retries.WithLabelValues(group).Inc()
		if s.moveToRetry(ctx, inv, st) {
			_ = d.Ack()
		} else {
			_ = d.Retry(dec.Wait) // it stays here; its redelivery moves it
		}
		s.scheds[RetryGroup].wakeAfter(dec.Wait)
	case Failed:
		if err := s.eng.DeadLetter(ctx, inv, st); err != nil {
			s.log.Warn("async: dead letter failed; delivering again later", "id", inv.ID, "err", err)
			_ = d.Retry(time.Second)
			return
		}
		if s.finish(ctx, d, st) {
			s.m.done.WithLabelValues(group, string(Failed)).Inc()
			s.callback(inv, st)
		}
	}
}

// moveToRetry stores inv in the retry group, due at st.NextAttempt,
// deduplicated by its attempt number.
func (s *Service) moveToRetry(ctx context.Context, inv *Invocation, st Status) bool {
	c := *inv
	c.Group, c.NotBefore = RetryGroup, st.NextAttempt
	if err := s.eng.Requeue(ctx, &c, "retry:"+inv.ID+":"+strconv.Itoa(st.Attempts)); err != nil {
		s.log.Warn("async: retry not moved to the retry group; it waits in its group", "id", inv.ID, "err", err)
		return false
	}
	return true
}

// finish records a final status, then acknowledges.
func (s *Service) finish(ctx context.Context, d Delivery, st Status) bool {
	if err := s.eng.SetStatus(ctx, st); err != nil {
		s.log.Warn("async: status write failed; delivering again later", "id", st.ID, "err", err)
		_ = d.Retry(time.Second)
		return false
	}
	if err := d.Ack(); err != nil {
		s.log.Warn("async: ack failed (the redelivery will see the final status)", "id", st.ID, "err", err)
	}
	s.onSt(st)
	return true
}

// attempt dispatches once, keeping the delivery alive meanwhile.
func (s *Service) attempt(ctx context.Context, d Delivery, inv *Invocation, n int) outcome.Outcome {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AttemptTimeout)
	defer cancel()
	stop := make(chan struct{})
	var keep sync.WaitGroup
	keep.Go(func() {
		t := s.clk.NewTicker(s.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C():
				_ = d.InProgress()
			case <-stop:
				return
			}
		}
	})
	defer func() { close(stop); keep.Wait() }()
	req, err := inv.Request(ctx, n)
	if err != nil {
		return outcome.Outcome{Kind: outcome.ClientError, Err: err}
	}
	resp, err := s.d.Dispatch(ctx, req, inv)
	o := outcome.ClassifyAt(resp, err, s.clk.Now())
	if resp != nil {
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		_ = resp.Body.Close()
	}
	return o
}

// Request builds attempt n's upstream request: the stored method, host,
// path, headers and body, plus the invocation id, the attempt number and
// the idempotency key.
func (inv *Invocation) Request(ctx context.Context, n int) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, inv.Method, "http://"+inv.Host+inv.Path, bytes.NewReader(inv.Body))
	if err != nil {
		return nil, fmt.Errorf("async: stored request: %w", err)
	}
	req.Header = inv.Header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Host = inv.Host
	req.Header.Set(IDHeader, inv.ID)
	req.Header.Set(AttemptHeader, strconv.Itoa(n))
	if inv.Key != "" {
		req.Header.Set(KeyHeader, inv.Key)
	}
	return req, nil
}

// callback posts the final status to the invocation's callback URL, with
// bounded retries.
func (s *Service) callback(inv *Invocation, st Status) {
	if inv.Callback == "" {
		return
	}
	body, _ := json.Marshal(st)
	for i := range s.cfg.CallbackAttempts {
		if i > 0 {
			s.sleep(time.Duration(1<<(i-1)) * time.Second)
		}
		req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, inv.Callback, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(IDHeader, inv.ID)
		resp, err := s.cb.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode < 300 {
				return
			}
		}
		if s.ctx.Err() != nil {
			return
		}
	}
	s.m.callbackFailed.Inc()
	s.log.Warn("async: callback failed", "id", inv.ID, "url", inv.Callback)
}

// sleep waits d on the service's clock, or until Close.
func (s *Service) sleep(d time.Duration) {
	t := s.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-s.ctx.Done():
	}
}
