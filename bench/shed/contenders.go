// Package shed is the side-by-side overload bench of veer's shed package
// against no shedding, a static concurrency limit, failsafe-go's adaptive
// limiter with its prioritizer, go-zero's adaptive shedder and
// go-kratos/aegis BBR (see docs/shed.md). It holds the server side (handlers
// and contenders), the open-loop load generator and the report; the command
// bench/cmd/shedbench runs the scenarios.
package shed

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/priority"
	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/zeromicro/go-zero/core/load"
	"github.com/zeromicro/go-zero/core/logx"

	"github.com/veerhq/veer/outcome"
	"github.com/veerhq/veer/shed"
	"github.com/veerhq/veer/tier"
)

// StaticLimit is the static contender's concurrency limit: an operator's
// reasonable guess, as a static limit always is.
const StaticLimit = 16

// go-zero starts a CPU statistics goroutine that logs to stdout every
// minute in any process that links it; keep the bench's output clean.
func init() {
	load.DisableLog()
	logx.DisableStat()
}

// Contenders names every contender, in table order.
var Contenders = []string{"none", "static", "veer", "failsafe", "gozero", "bbr"}

// Wrap returns next protected by the named contender, and a function that
// releases the contender's resources.
func Wrap(name string, next http.Handler) (http.Handler, func(), error) {
	switch name {
	case "none":
		return next, func() {}, nil
	case "static":
		return staticLimit(StaticLimit, next), func() {}, nil
	case "veer", "veer-hold":
		reg := prometheus.NewRegistry()
		c := shed.Config{Registerer: reg}
		if name == "veer-hold" {
			c.RejectHold = shed.StormRejectHold // refusals held in every storm (the zero config: in a deep one, HTTP/1.x only)
		}
		s, err := shed.New(c)
		if err != nil {
			return nil, nil, err
		}
		if os.Getenv("SHEDBENCH_DEBUG") != "" {
			go func() {
				for range time.Tick(100 * time.Millisecond) {
					fmt.Fprintf(os.Stderr, "%s %+v\n", time.Now().Format("05.000"), s.Stats())
				}
			}()
		}
		h := s.Middleware(next)
		if os.Getenv("SHEDBENCH_DEBUG") != "" {
			h = debugTiming(h)
		}
		return h, func() { s.Close(); reportHeld(name, reg) }, nil
	case "failsafe":
		return failsafeHandler(next)
	case "gozero":
		sh := load.NewAdaptiveShedder()
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, err := sh.Allow()
			if err != nil {
				rejectHTTP(w)
				return
			}
			defer p.Pass()
			next.ServeHTTP(w, r)
		}), func() {}, nil
	case "bbr":
		l := bbr.NewLimiter()
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			done, err := l.Allow()
			if err != nil {
				rejectHTTP(w)
				return
			}
			defer done(ratelimit.DoneInfo{})
			next.ServeHTTP(w, r)
		}), func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown contender %q (have %v)", name, Contenders)
}

func rejectHTTP(w http.ResponseWriter) {
	outcome.WriteHTTP(w, outcome.Outcome{Kind: outcome.Overloaded}, "overload")
}

func staticLimit(n int64, next http.Handler) http.Handler {
	var inflight atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inflight.Add(1) > n {
			inflight.Add(-1)
			rejectHTTP(w)
			return
		}
		defer inflight.Add(-1)
		next.ServeHTTP(w, r)
	})
}

// failsafeHandler is failsafe-go's adaptive limiter built prioritized, with
// the prioritizer calibrated every second; the request's tier maps to a
// failsafe priority.
func failsafeHandler(next http.Handler) (http.Handler, func(), error) {
	p := adaptivelimiter.NewPrioritizer()
	l := adaptivelimiter.NewBuilder[any]().BuildPrioritized(p)
	cancel := p.ScheduleCalibrations(context.Background(), time.Second)
	prio := map[tier.Tier]priority.Priority{
		tier.Unset: priority.Medium, tier.Sheddable: priority.Low, tier.SheddablePlus: priority.Medium,
		tier.Critical: priority.High, tier.CriticalPlus: priority.VeryHigh,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, _ := tier.FromHeader(r.Header)
		permit, err := l.AcquirePermitWithPriority(r.Context(), prio[t])
		if err != nil {
			rejectHTTP(w)
			return
		}
		defer permit.Record()
		next.ServeHTTP(w, r)
	}), cancel, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// debugTiming prints, every second, the p50/p99 of the server-side time
// (middleware entry to handler return) of admitted requests.
func debugTiming(next http.Handler) http.Handler {
	var mu sync.Mutex
	var lat []time.Duration
	go func() {
		for range time.Tick(time.Second) {
			mu.Lock()
			l := lat
			lat = nil
			mu.Unlock()
			if len(l) == 0 {
				continue
			}
			slices.Sort(l)
			fmt.Fprintf(os.Stderr, "server-side n=%d p50=%v p99=%v\n", len(l), l[len(l)/2], l[len(l)*99/100])
		}
	}()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		rec := &statusRec{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.code == 0 || rec.code == 200 {
			d := time.Since(t0)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		}
	})
}

type statusRec struct {
	http.ResponseWriter
	code int
}

func (s *statusRec) WriteHeader(c int) { s.code = c; s.ResponseWriter.WriteHeader(c) }

// reportHeld writes to standard error how many refusals the veer server
// held over its life (veer_shed_held_refusals_total): whether a storm was
// paced, which the default hold does only in a deep storm.
func reportHeld(name string, reg *prometheus.Registry) {
	mfs, err := reg.Gather()
	if err != nil {
		return
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "veer_shed_held_refusals_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	fmt.Fprintf(os.Stderr, "%s server: %.0f refusals held\n", name, n)
}
