package sim

import "math/bits"

// hist is a log-linear histogram of non-negative integers (microseconds
// here): exact below 128, then 64 buckets per power of two, so a reported
// percentile is within 1.6% of the true value. Counts are integers, so
// merging histograms in any order gives the same result.
type hist struct {
	c []int64
	n int64
}

const histSub = 64

func histIndex(v int64) int {
	if v < 2*histSub {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 7 // v>>e is in [64, 128)
	return 2*histSub + (e-1)*histSub + int(v>>e) - histSub
}

// histLow returns the smallest value of bucket i.
func histLow(i int) int64 {
	if i < 2*histSub {
		return int64(i)
	}
	e := (i-2*histSub)/histSub + 1
	m := int64((i-2*histSub)%histSub + histSub)
	return m << e
}

func (h *hist) add(v int64) {
	i := histIndex(v)
	if i >= len(h.c) {
		n := make([]int64, i+1+histSub)
		copy(n, h.c)
		h.c = n
	}
	h.c[i]++
	h.n++
}

func (h *hist) merge(o *hist) {
	if len(o.c) > len(h.c) {
		n := make([]int64, len(o.c))
		copy(n, h.c)
		h.c = n
	}
	for i, c := range o.c {
		h.c[i] += c
	}
	h.n += o.n
}

// quantile returns the q-quantile (0 < q <= 1) as the midpoint of its
// bucket, or 0 for an empty histogram.
func (h *hist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen int64
	for i, c := range h.c {
		seen += c
		if seen >= rank {
			lo, hi := histLow(i), histLow(i+1)
			return float64(lo) + float64(hi-lo-1)/2
		}
	}
	return 0
}
