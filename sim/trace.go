package sim

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Trace is the connectivity of a Mahimahi packet-delivery trace: the file
// has one line per delivery opportunity, the time in milliseconds since the
// start, non-decreasing; the trace repeats with a period equal to its last
// timestamp (Mahimahi's looping semantics). A pause of at least
// GapThreshold without an opportunity is a gap; the scenario's trace_gaps
// section says what a gap does to requests (delays them by retransmission,
// by default).
type Trace struct {
	// Period is the length of one loop of the trace.
	Period time.Duration
	// Gaps are the gaps within one loop, sorted, as offsets from the
	// loop's start; a gap that wraps around the end is split in two.
	Gaps []Interval
	// Opportunities is the number of lines.
	Opportunities int
}

// Plausibility bounds of a trace in milliseconds: what a cellular or Wi-Fi
// link gives (one 1500-byte packet per opportunity) and how long a recorded
// drive lasts. A trace outside them was almost surely written in another
// unit: seconds give a huge rate over a short period, microseconds a tiny
// rate over days.
const (
	minTracePeriod = time.Second
	maxTracePeriod = 24 * time.Hour
	maxTraceRate   = 100_000 // opportunities per second: 1.2 Gbit/s
	minTraceRate   = 0.5     // opportunities per second: 6 kbit/s
)

// Interval is a half-open time interval [From, To).
type Interval struct{ From, To time.Duration }

// GapThreshold is the shortest gap in a trace treated as an outage.
const GapThreshold = time.Second

// ErrTrace is wrapped by every trace parsing error.
var ErrTrace = errors.New("sim: bad trace")

//go:embed traces/*.trace
var bundledTraces embed.FS

// maxTraceLine bounds one line of a trace file.
const maxTraceLine = 64 << 10

// ParseTrace reads a Mahimahi trace. name is used in errors.
func ParseTrace(data []byte, name string) (*Trace, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64), maxTraceLine)
	var times []int64
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%w: %s:%d: want a timestamp in ms, got %q", ErrTrace, name, line, s)
		}
		if v > int64(30*24*time.Hour/time.Millisecond) {
			return nil, fmt.Errorf("%w: %s:%d: timestamp %d ms is beyond 30 days: timestamps must be milliseconds", ErrTrace, name, line, v)
		}
		if n := len(times); n > 0 && v < times[n-1] {
			return nil, fmt.Errorf("%w: %s:%d: timestamp %d before %d", ErrTrace, name, line, v, times[n-1])
		}
		times = append(times, v)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: %s:%d: line longer than %d bytes", ErrTrace, name, line+1, maxTraceLine)
		}
		return nil, fmt.Errorf("%w: %s:%d: %v", ErrTrace, name, line+1, err)
	}
	if len(times) == 0 || times[len(times)-1] == 0 {
		return nil, fmt.Errorf("%w: %s: no opportunities, or a zero period", ErrTrace, name)
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	t := &Trace{Period: ms(times[len(times)-1]), Opportunities: len(times)}
	thr := int64(GapThreshold / time.Millisecond)
	// The gap that wraps around: from the last opportunity to the first
	// one of the next loop (at period + times[0]) is times[0] long, since
	// the last opportunity sits exactly at the period.
	if times[0] >= thr {
		t.Gaps = append(t.Gaps, Interval{0, ms(times[0])})
	}
	for i := 1; i < len(times); i++ {
		if times[i]-times[i-1] >= thr {
			t.Gaps = append(t.Gaps, Interval{ms(times[i-1]), ms(times[i])})
		}
	}
	return t, nil
}

// OutageShare is the fraction of the trace's time spent in gaps.
func (t *Trace) OutageShare() float64 { return t.ShareAbove(0) }

// ShareAbove is the fraction of the trace's time spent in gaps at least d
// long.
func (t *Trace) ShareAbove(d time.Duration) float64 {
	var sum time.Duration
	for _, g := range t.Gaps {
		if g.To-g.From >= d {
			sum += g.To - g.From
		}
	}
	return float64(sum) / float64(t.Period)
}

// Rate is the mean number of delivery opportunities per second.
func (t *Trace) Rate() float64 { return float64(t.Opportunities) / t.Period.Seconds() }

// Longest is the longest gap.
func (t *Trace) Longest() time.Duration {
	var l time.Duration
	for _, g := range t.Gaps {
		l = max(l, g.To-g.From)
	}
	return l
}

// Plausible returns an error with the numbers when the trace's period or
// rate is outside what a recorded link gives in milliseconds (a file in
// seconds or microseconds).
func (t *Trace) Plausible() error {
	switch r := t.Rate(); {
	case t.Period < minTracePeriod || t.Period > maxTracePeriod:
		return fmt.Errorf("%w: period %v (%d opportunities, %.4g per second) is outside %v..%v: timestamps must be milliseconds",
			ErrTrace, t.Period, t.Opportunities, r, minTracePeriod, maxTracePeriod)
	case r > maxTraceRate || r < minTraceRate:
		return fmt.Errorf("%w: %.4g opportunities per second over %v is outside %g..%d: timestamps must be milliseconds",
			ErrTrace, r, t.Period, minTraceRate, maxTraceRate)
	}
	return nil
}

// BundledTraces returns the names of the bundled traces, sorted.
func BundledTraces() []string {
	entries, _ := bundledTraces.ReadDir("traces")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".trace"))
	}
	return names
}

// ErrUnknownTrace is wrapped by the error for a trace reference that is
// neither a bundled trace nor a file.
var ErrUnknownTrace = errors.New("sim: unknown trace")

// loadTrace reads a bundled trace by name or a file relative to dir, and
// checks that it is plausible.
func loadTrace(ref, dir string) (*Trace, error) {
	var t *Trace
	var err error
	if data, berr := bundledTraces.ReadFile("traces/" + ref + ".trace"); berr == nil && !strings.ContainsAny(ref, "/.") {
		t, err = ParseTrace(data, ref)
	} else {
		p := ref
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if t, ok := traceCache.get(p); ok {
			return t, nil
		}
		data, ferr := os.ReadFile(p)
		if errors.Is(ferr, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w %q: no bundled trace of that name (bundled: %s) and no file %s (%w)",
				ErrUnknownTrace, ref, strings.Join(BundledTraces(), ", "), p, fs.ErrNotExist)
		}
		if ferr != nil {
			return nil, ferr
		}
		t, err = ParseTrace(data, p)
		if err == nil && t.Plausible() == nil {
			traceCache.put(p, t)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := t.Plausible(); err != nil {
		return nil, err
	}
	return t, nil
}

// traceCache keeps parsed trace files (read-only once parsed) by path,
// size and modification time, so that scenarios sharing a real drive of
// hundreds of thousands of lines parse it once per process.
var traceCache = &traceFiles{m: map[traceKey]*Trace{}}

type traceKey struct {
	path string
	size int64
	mod  time.Time
}

type traceFiles struct {
	mu sync.Mutex
	m  map[traceKey]*Trace
}

func keyOf(path string) (traceKey, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return traceKey{}, false
	}
	return traceKey{path, fi.Size(), fi.ModTime()}, true
}

func (c *traceFiles) get(path string) (*Trace, bool) {
	k, ok := keyOf(path)
	if !ok {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[k]
	return t, ok
}

func (c *traceFiles) put(path string, t *Trace) {
	k, ok := keyOf(path)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= 64 { // bounded: forget everything rather than grow
		clear(c.m)
	}
	c.m[k] = t
}

// gapsIn appends the trace's gaps that fall in [off, off+length) of the
// replay, as absolute times of a session that started replaying the trace
// at offset off at time base: gaps at least outageAbove long (when it is
// positive) to down, the others to stall. A gap keeps its class when the
// window clips it.
func (t *Trace) gapsIn(down, stall []span, base, off, length, outageAbove int64) ([]span, []span) {
	period := int64(t.Period)
	if len(t.Gaps) == 0 {
		return down, stall
	}
	// Replay position p = off + (x - base) for x in [base, base+length).
	for loop := (off / period) * period; loop < off+length; loop += period {
		for _, g := range t.Gaps {
			from, to := loop+int64(g.From), loop+int64(g.To)
			if to <= off || from >= off+length {
				continue
			}
			full := to - from
			from, to = max(from, off), min(to, off+length)
			s := span{base + from - off, base + to - off}
			if outageAbove > 0 && full >= outageAbove {
				down = append(down, s)
			} else {
				stall = append(stall, s)
			}
		}
	}
	return down, stall
}
