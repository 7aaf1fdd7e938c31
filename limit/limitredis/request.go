package limitredis

import (
	"math"
	"strconv"
	"time"

	"github.com/veerhq/veer/limit"
)

// spec is one Limits as script arguments, built once per config so that a
// decision formats and boxes nothing but its keys.
type spec struct {
	rate      bool
	t, tau    any // emission interval and tolerance, ns, decimal strings
	conc      bool
	maxFlight any
	dim       any // the dimension's index
}

// dimSpec is one dimension: its Redis key prefixes and its limits.
type dimSpec struct {
	name             string
	rprefix, cprefix string
	def              spec
	over             map[string]spec
}

func newSpec(l limit.Limits, dim int) spec {
	s := spec{dim: dim}
	if l.Rate > 0 {
		t := 1e9 / l.Rate
		burst := l.Burst
		if burst <= 0 {
			burst = max(1, int(math.Ceil(l.Rate)))
		}
		s.rate = true
		s.t = strconv.FormatFloat(t, 'g', -1, 64)
		s.tau = strconv.FormatFloat(t*float64(burst), 'g', -1, 64)
	}
	if l.Concurrency > 0 {
		s.conc = true
		s.maxFlight = l.Concurrency
	}
	return s
}

// newDimSpecs resolves the dimensions of cfg. The Redis key of dimension
// i's key k is rprefix+k (rate) or cprefix+k (concurrency): prefix + "r:"
// or "c:" + the length of the dimension's name in decimal + ":" + name +
// ":". The length makes the encoding unambiguous: dimension "t" with key
// "a:b" is "r:1:t:a:b" and dimension "t:a" with key "b" is "r:3:t:a:b", so
// two dimensions (two tenants' keys) can never share a bucket, whatever
// characters names and keys contain.
func newDimSpecs(prefix string, dims []limit.Dimension) []dimSpec {
	out := make([]dimSpec, len(dims))
	for i, d := range dims {
		mid := strconv.Itoa(len(d.Name)) + ":" + d.Name + ":"
		ds := dimSpec{name: d.Name, rprefix: prefix + "r:" + mid, cprefix: prefix + "c:" + mid, def: newSpec(d.Default, i)}
		if len(d.Overrides) > 0 {
			ds.over = make(map[string]spec, len(d.Overrides))
			for k, o := range d.Overrides {
				ds.over[k] = newSpec(o, i)
			}
		}
		out[i] = ds
	}
	return out
}

// limits is the snapshot of the limits in force, replaced whole by Apply.
type limits struct {
	dims           []dimSpec
	instances      int
	concRetryAfter time.Duration
}

func newLimits(cfg Config) *limits {
	return &limits{dims: newDimSpecs(cfg.Prefix, cfg.Limits.Dimensions), instances: cfg.Instances, concRetryAfter: cfg.Limits.ConcurrencyRetryAfter}
}

// request is one decision's script call. Its slices are reused: a request
// lives in a pooled call.
type request struct {
	keys  []string // GCRA keys, then lease sets
	args  []any
	cargs []any    // scratch: the lease sets' arguments
	ckeys []string // the lease sets (a tail of keys)
	lease string   // lease id, "" without concurrency limits
}

// prepare fills req with keys' part of a script call. It reports false
// when no dimension limits the request.
func (l *Limiter) prepare(req *request, lims *limits, keys []string) bool {
	req.keys, req.args, req.cargs, req.lease = req.keys[:0], req.args[:0], req.cargs[:0], ""
	req.args = append(req.args, 0, 0, "")
	nr := 0
	for i := range lims.dims {
		if i >= len(keys) || keys[i] == "" {
			continue
		}
		d := &lims.dims[i]
		s := &d.def
		if d.over != nil {
			if o, ok := d.over[keys[i]]; ok {
				s = &o
			}
		}
		if s.rate {
			req.keys = append(req.keys, d.rprefix+keys[i])
			req.args = append(req.args, s.t, s.tau, s.dim)
			nr++
		}
		if s.conc {
			req.cargs = append(req.cargs, d.cprefix+keys[i], s.maxFlight, s.dim)
		}
	}
	nc := len(req.cargs) / 3
	if nr == 0 && nc == 0 {
		return false
	}
	for j := 0; j < len(req.cargs); j += 3 {
		req.keys = append(req.keys, req.cargs[j].(string))
		req.args = append(req.args, req.cargs[j+1], req.cargs[j+2])
	}
	req.ckeys = req.keys[nr:]
	if nc > 0 {
		req.lease = l.id + ":" + strconv.FormatUint(l.seq.Add(1), 36)
		req.args[2] = req.lease
	}
	req.args[0], req.args[1] = nr, nc
	return true
}

// scriptCall appends to keys and args the script call deciding reqs in
// order, at Redis's TIME (now "") or at now (ns since the epoch, decimal;
// tests only).
func (l *Limiter) scriptCall(keys []string, args []any, reqs []*request, now string) ([]string, []any) {
	args = append(args, len(reqs), now, l.ttlArg)
	for _, r := range reqs {
		keys = append(keys, r.keys...)
		args = append(args, r.args...)
	}
	return keys, args
}
