// Package gateway holds the pieces of the side-by-side gateway benchmark
// (bench/cmd/gatewaybench): the contenders (veer gateway, HAProxy, nginx,
// Caddy, a tuned httputil.ReverseProxy), a closed-loop load generator and
// the /proc readings (CPU time, RSS) of a process tree.
package gateway

import (
	"os"
	"strconv"
	"strings"
)

// clkTck is USER_HZ, 100 on Linux.
const clkTck = 100

// CPUSeconds returns the user+system CPU time of pid and every descendant
// (nginx workers, for instance), from /proc.
func CPUSeconds(pid int) float64 {
	var ticks int64
	for _, p := range tree(pid) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		// fields after the name: state(0) ppid(1) ... utime(11) stime(12)
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return float64(ticks) / clkTck
}

// RSSBytes returns the resident set of pid and its descendants.
func RSSBytes(pid int) int64 {
	var sum int64
	for _, p := range tree(pid) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				f := strings.Fields(l)
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				sum += kb << 10
			}
		}
	}
	return sum
}

// tree returns pid and its descendants.
func tree(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		pp, _ := strconv.Atoi(f[1])
		children[pp] = append(children[pp], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}
