package up

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// usage is the CPU time and resident memory of a set of processes, read
// from /proc (Linux); zero elsewhere.
type usage struct {
	cpu time.Duration // user + system
	rss int64         // bytes
	pss int64         // proportional set size: shared pages split between their users
}

// userHZ is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const userHZ = 100

func procUsage(pid int) (usage, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return usage{}, err
	}
	u, err := parseStat(string(b))
	if err != nil {
		return usage{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	if r, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err == nil {
		u.pss = parsePss(string(r))
	}
	return u, nil
}

// parsePss reads the "Pss:" line (kB) of /proc/PID/smaps_rollup; 0 when
// absent.
func parsePss(s string) int64 {
	for line := range strings.Lines(s) {
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb >= 0 {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// parseStat reads utime, stime and rss from a /proc/PID/stat line.
func parseStat(s string) (usage, error) {
	// the command may hold spaces and parentheses: fields start after the
	// last ')'
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return usage{}, errors.New("no ')'")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime 15, rss 24
	if len(f) < 22 {
		return usage{}, fmt.Errorf("%d fields", len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	rss, err3 := strconv.ParseInt(f[21], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return usage{}, errors.New("bad numbers")
	}
	return usage{cpu: time.Duration(ut+st) * time.Second / userHZ, rss: rss * int64(os.Getpagesize())}, nil
}

// systemUsage sums this process and the running children; cpu is each
// one's CPU time by pid, for cpuSince.
func (s *System) systemUsage() (total usage, cpu map[int]time.Duration) {
	pids := []int{os.Getpid()}
	for _, c := range s.children {
		if p := c.Pid(); p > 0 {
			pids = append(pids, p)
		}
	}
	cpu = make(map[int]time.Duration, len(pids))
	for _, p := range pids {
		if u, err := procUsage(p); err == nil {
			total.cpu += u.cpu
			total.rss += u.rss
			total.pss += u.pss
			cpu[p] = u.cpu
		}
	}
	return total, cpu
}

// cpuSince is the CPU time the processes spent between two readings: the
// sum over the pids in both. A child restarted in between (a new pid)
// counts from its next reading: its old process's time is gone, and the
// sums' difference would go negative.
func cpuSince(prev, cur map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, c := range cur {
		if p, ok := prev[pid]; ok && c >= p {
			d += c - p
		}
	}
	return d
}
