package dns

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Report prints the rounds and a summary with ratios to the baseline server
// (per-round ratios, then their median: each ratio compares two runs of the
// same round, minutes apart at most).
func Report(w io.Writer, rounds [][]Result, baseline string) {
	fmt.Fprintf(w, "| round | server | queries/s | completed | lost | server CPU per query |\n|---|---|---|---|---|---|\n")
	for i, rs := range rounds {
		for _, r := range rs {
			fmt.Fprintf(w, "| %d | %s | %.0f | %d | %d | %.2f µs |\n", i+1, r.Server, r.QPS, r.Completed, r.Lost, us(r.CPUPerQuery()))
		}
	}
	var names []string
	for _, r := range rounds[0] {
		if !slices.Contains(names, r.Server) {
			names = append(names, r.Server)
		}
	}
	slices.Sort(names)
	fmt.Fprintf(w, "\n| server | median queries/s | lost (all rounds) | median CPU per query | queries/s ÷ %s (median of rounds) | CPU per query ÷ %s | CPU per query ÷ %s, range of rounds |\n|---|---|---|---|---|---|---|\n", baseline, baseline, baseline)
	for _, n := range names {
		var qps, cpu, rq, rc []float64
		var lost int64
		for _, rs := range rounds {
			r, ok := find(rs, n)
			b, okb := find(rs, baseline)
			if !ok {
				continue
			}
			qps = append(qps, r.QPS)
			cpu = append(cpu, us(r.CPUPerQuery()))
			lost += r.Lost
			if okb && b.QPS > 0 && b.CPUPerQuery() > 0 {
				rq = append(rq, r.QPS/b.QPS)
				rc = append(rc, float64(r.CPUPerQuery())/float64(b.CPUPerQuery()))
			}
		}
		fmt.Fprintf(w, "| %s | %.0f | %d | %.2f µs | %.2f× | %.2f× | %.2f–%.2f× |\n", n, median(qps), lost, median(cpu), median(rq), median(rc), minOf(rc), maxOf(rc))
	}
}

func find(rs []Result, name string) (Result, bool) {
	for _, r := range rs {
		if r.Server == name {
			return r, true
		}
	}
	return Result{}, false
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return slices.Min(v)
}

func maxOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return slices.Max(v)
}
