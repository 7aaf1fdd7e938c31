package sim

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Trace is the connectivity of a Mahimahi packet-delivery trace: the file
// has one line per delivery opportunity, the time in milliseconds since the
// start, non-decreasing; the trace repeats with a period equal to its last
// timestamp (Mahimahi's looping semantics). A gap of at least GapThreshold
// without an opportunity is an outage.
type Trace struct {
	// Period is the length of one loop of the trace.
	Period time.Duration
	// Gaps are the outages within one loop, sorted, as offsets from the
	// loop's start; a gap that wraps around the end is split in two.
	Gaps []Interval
	// Opportunities is the number of lines.
	Opportunities int
}

// Interval is a half-open time interval [From, To).
type Interval struct{ From, To time.Duration }

// GapThreshold is the shortest gap in a trace treated as an outage.
const GapThreshold = time.Second

// ErrTrace is wrapped by every trace parsing error.
var ErrTrace = errors.New("sim: bad trace")

//go:embed traces/*.trace
var bundledTraces embed.FS

// ParseTrace reads a Mahimahi trace. name is used in errors.
func ParseTrace(data []byte, name string) (*Trace, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64), 1<<16)
	var times []int64
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 || v > int64(30*24*time.Hour/time.Millisecond) {
			return nil, fmt.Errorf("%w: %s:%d: want a timestamp in ms, got %q", ErrTrace, name, line, s)
		}
		if n := len(times); n > 0 && v < times[n-1] {
			return nil, fmt.Errorf("%w: %s:%d: timestamp %d before %d", ErrTrace, name, line, v, times[n-1])
		}
		times = append(times, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrTrace, name, err)
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
func (t *Trace) OutageShare() float64 {
	var d time.Duration
	for _, g := range t.Gaps {
		d += g.To - g.From
	}
	return float64(d) / float64(t.Period)
}

// loadTrace reads a bundled trace by name or a file relative to dir.
func loadTrace(ref, dir string) (*Trace, error) {
	if !strings.ContainsAny(ref, "/.") {
		data, err := bundledTraces.ReadFile("traces/" + ref + ".trace")
		if err == nil {
			return ParseTrace(data, ref)
		}
	}
	p := ref
	if !filepath.IsAbs(p) && dir != "" {
		p = filepath.Join(dir, p)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return ParseTrace(data, p)
}

// gapsIn appends to dst the trace's gaps that fall in [from, to) of a
// session that started replaying the trace at offset off, as absolute
// times (session time base + ...).
func (t *Trace) gapsIn(dst []span, base, off, length int64) []span {
	period := int64(t.Period)
	if len(t.Gaps) == 0 {
		return dst
	}
	// Replay position p = off + (x - base) for x in [base, base+length).
	for loop := (off / period) * period; loop < off+length; loop += period {
		for _, g := range t.Gaps {
			from, to := loop+int64(g.From), loop+int64(g.To)
			if to <= off || from >= off+length {
				continue
			}
			from, to = max(from, off), min(to, off+length)
			dst = append(dst, span{base + from - off, base + to - off})
		}
	}
	return dst
}
