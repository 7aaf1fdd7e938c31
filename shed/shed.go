package shed

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/shed/internal/runq"
	"github.com/veerhq/veer/tier"
)

// OtherEndpoint names the stage shared by endpoints beyond MaxEndpoints.
const OtherEndpoint = "other"

// Shedder admits or sheds requests, per endpoint and tier. It is safe for
// concurrent use. Build one with New; adapt it with Middleware (net/http) or
// the shedgrpc interceptors.
type Shedder struct {
	clk        clock.Clock
	log        *slog.Logger
	m          *metrics
	endpointFn func(*http.Request) string
	maxEps     int
	// rq tells whether requests wait in the run queue before they reach
	// a stage (runq.Process); nil: never. yield gives up the
	// processor before a handler runs while they do (runq.Yield). settle
	// is what the start turn does after a yield so that the goroutines
	// its poll woke run first (runq.Turns.Wait); nil: yield again. The
	// virtual-time models' core runs a yielder behind what its poll found
	// already, and sets a no-op. turns is the line of start turns
	// (runq.ProcessTurns).
	rq     runq.Queue
	yield  func()
	settle func()
	turns  *runq.Turns
	// ioBound: Config.IOBound; admitted requests never yield (acquire).
	ioBound bool

	// episodeHold is how many intervals a fresh overload's standing
	// queue must last before its first drop (DefaultEpisodeHold,
	// episode.go); a field so that TestModelEpisodeCurve can sweep it.
	episodeHold int

	held atomic.Int64  // refusals being held (see pace.go)
	pace pacer         // releases them
	done chan struct{} // closed by Close

	marks connMarks // connections that carried a never-shed request (see pace.go)

	pol    atomic.Pointer[policy]
	stages atomic.Pointer[map[string]*stage] // copy-on-write

	mu        sync.Mutex // serialises stage creation, reloads and admin changes
	file      Config
	overrides map[tableKey]tier.Tier
	closed    bool
}

// New validates c and returns a Shedder. The zero Config works.
func New(c Config) (*Shedder, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	s := &Shedder{
		clk:         clock.Or(c.Clock),
		log:         obs.LoggerOr(c.Logger),
		m:           newMetrics(c.Registerer),
		endpointFn:  c.Endpoint,
		maxEps:      c.MaxEndpoints,
		file:        c,
		overrides:   map[tableKey]tier.Tier{},
		rq:          runq.Process(),
		yield:       runq.Yield,
		turns:       runq.ProcessTurns(),
		ioBound:     c.IOBound,
		episodeHold: episodeHold,
		done:        make(chan struct{}),
	}
	s.pace.clk = s.clk
	if s.maxEps <= 0 {
		s.maxEps = DefaultMaxEndpoints
	}
	s.pol.Store(compile(&c, nil))
	empty := map[string]*stage{}
	s.stages.Store(&empty)
	return s, nil
}

// Apply replaces the file-level configuration (everything with a yaml tag)
// with c, keeping the admin overrides and the learned state of every
// endpoint; it is the reload function for config/watch:
//
//	watch.File(path, watch.Options{}, s.Apply)
//
// An invalid c is rejected and the old configuration stays. So is a c that
// asks for what cannot change at run time, with an error naming the field:
// a MaxEndpoints (after its default) other than New's, or a wiring field
// (Clock, Logger, Registerer, Endpoint, IOBound) that is set: those belong to New, and
// a config file never sets them.
func (s *Shedder) Apply(c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if err := s.checkFixed(&c); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.file = c
	s.publishLocked()
	return nil
}

// publishLocked compiles the file config and the admin overrides into the
// policy the request path reads, and puts it into force in every stage.
func (s *Shedder) publishLocked() {
	p := compile(&s.file, s.overrides)
	s.pol.Store(p)
	for _, st := range *s.stages.Load() {
		st.configure(p)
	}
}

// errFixed is the reason Apply gives for a field it cannot change.
var errFixed = errors.New("cannot change at run time; set it in New")

func (s *Shedder) checkFixed(c *Config) error {
	var errs []error
	maxEps := c.MaxEndpoints
	if maxEps <= 0 {
		maxEps = DefaultMaxEndpoints
	}
	if maxEps != s.maxEps {
		errs = append(errs, config.Field("max_endpoints", "%w (%d now, %d asked)", errFixed, s.maxEps, maxEps))
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"Clock", c.Clock != nil}, {"Logger", c.Logger != nil}, {"Registerer", c.Registerer != nil}, {"Endpoint", c.Endpoint != nil}, {"IOBound", c.IOBound}} {
		if f.set {
			errs = append(errs, config.Field(f.name, "%w (a wiring field: leave it nil in Apply)", errFixed))
		}
	}
	return errors.Join(errs...)
}

// Resolve returns the tier of a request to endpoint from caller, which stated
// the tier stated (Unset if none): the stated tier if the caller may state
// one, else the endpoint × caller table, else the default.
func (s *Shedder) Resolve(endpoint, caller string, stated tier.Tier) tier.Tier {
	return s.pol.Load().resolve(endpoint, caller, stated)
}

// Acquire admits a request of tier t to endpoint, waiting in the endpoint's
// queue when its slots are busy. It returns a *Rejection (errors.Is ErrShed)
// when the request is shed, or when ctx ends while it waits. On success the
// caller must Release the Ticket when the request is done.
func (s *Shedder) Acquire(ctx context.Context, endpoint string, t tier.Tier) (Ticket, error) {
	p := s.pol.Load()
	if !t.Valid() {
		t = p.defTier
	}
	return s.stage(endpoint).acquire(ctx, t, p)
}

// Check is the non-blocking fast reject used before any work is done (gRPC's
// tap handle): it sheds a request of tier t to endpoint while the endpoint
// is overloaded and shedding higher tiers. A nil result does not admit; the
// request still goes through Acquire.
func (s *Shedder) Check(endpoint string, t tier.Tier) error {
	p := s.pol.Load()
	if !t.Valid() {
		t = p.defTier
	}
	st := s.lookup(endpoint)
	if st == nil {
		return nil
	}
	if st.shedding.Load() {
		st.maybeTick(s.clk.Now()) // never reject on a stale state
	}
	if st.rejectTier(t, p) {
		st.count(t, ReasonTier)
		return reject(ReasonTier)
	}
	return nil
}

// EndpointStats is a point-in-time view of one endpoint. Public: Stats
// returns it, and it is part of AdminView's JSON.
type EndpointStats struct {
	Endpoint   string `json:"endpoint"`
	Overloaded bool   `json:"overloaded"`
	Limit      int    `json:"limit"`
	Inflight   int    `json:"inflight"`
	Queued     int    `json:"queued"`
	// Baseline is the service time the limiter takes for unloaded (0
	// before its first window).
	Baseline time.Duration `json:"baseline_ns"`
}

// Stats returns the state of every tracked endpoint.
func (s *Shedder) Stats() []EndpointStats {
	m := *s.stages.Load()
	out := make([]EndpointStats, 0, len(m))
	for _, name := range sortedKeys(m) {
		out = append(out, m[name].refresh())
	}
	return out
}

// Close stops the stages' timers. Requests already waiting still end when
// their context does. It is safe to call more than once.
func (s *Shedder) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		close(s.done)
	}
	s.closed = true
	for _, st := range *s.stages.Load() {
		st.close()
	}
}

func (s *Shedder) lookup(endpoint string) *stage {
	return (*s.stages.Load())[endpoint]
}

// stage returns the endpoint's stage, creating it on first use. Beyond
// MaxEndpoints, new endpoints share the OtherEndpoint stage, so random paths
// cannot grow memory or metric series without bound.
func (s *Shedder) stage(endpoint string) *stage {
	if st := (*s.stages.Load())[endpoint]; st != nil {
		return st
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := *s.stages.Load()
	if st := cur[endpoint]; st != nil {
		return st
	}
	if len(cur) >= s.maxEps {
		endpoint = OtherEndpoint
		if st := cur[endpoint]; st != nil {
			return st
		}
	}
	st := newStage(s, endpoint, s.pol.Load())
	if s.closed {
		st.closed = true
	}
	next := make(map[string]*stage, len(cur)+1)
	maps.Copy(next, cur)
	next[endpoint] = st
	s.stages.Store(&next)
	return st
}
