package main

import (
	"net/http"
	"testing"
	"time"

	bench "github.com/veerhq/veer/bench/shed"
)

// TestIsolationWindows: scenario 3's p99s are taken over the windows they
// name (the alone phase; the spike from its 500th ms), each over the
// requests it holds, and the definitions before issue 18's fifth pass (the
// first 1.5 s alone, the spike's 500 ms-3 s) are reported beside them from
// the same requests.
func TestIsolationWindows(t *testing.T) {
	const spike = 10 * time.Second
	var ss []bench.Sample
	// Every request is written 0.5 ms (alone) or 1 ms (spike) after its
	// intended time, except as noted.
	add := func(phase int, at, lat time.Duration, status int) {
		wrote := 500 * time.Microsecond
		if phase == 1 {
			wrote = time.Millisecond
		}
		ss = append(ss, bench.Sample{Phase: phase, Stream: "crit", At: at, Latency: lat, Status: status, Wrote: wrote})
	}
	for i := range 200 { // alone: 6 ms, one cold 30 ms request first
		lat := 6 * time.Millisecond
		if i == 0 {
			lat = 30 * time.Millisecond
		}
		add(0, time.Duration(i)*50*time.Millisecond, lat, http.StatusOK)
	}
	for i := range 210 { // spike: 40 ms in its first 500 ms, 9 ms after, 20 ms from 3 s on
		at := spike + time.Duration(i)*50*time.Millisecond
		lat := 9 * time.Millisecond
		switch {
		case at < spike+500*time.Millisecond:
			lat = 40 * time.Millisecond
		case at >= spike+3*time.Second && i%50 == 0:
			lat = 20 * time.Millisecond
		}
		add(1, at, lat, http.StatusOK)
		if lat == 20*time.Millisecond {
			ss[len(ss)-1].Wrote = 12 * time.Millisecond // the generator was late
		}
	}
	add(1, spike+5*time.Second, 50*time.Millisecond, http.StatusOK)
	ss[len(ss)-1].Wrote = 0                   // not recorded: left out of the from-write p99s
	add(1, spike+time.Second, time.Second, 0) // one failure
	ss = append(ss, bench.Sample{Phase: 1, Stream: "bulk", At: spike + time.Second, Latency: time.Second, Status: http.StatusOK})
	r := bench.Result{Extra: map[string]float64{}}
	isolation(&r, ss, spike)
	for k, want := range map[string]float64{
		"crit_p99_alone_ms":        6,   // 200 requests: the cold one is the 1%
		"crit_n_alone":             200, //
		"crit_p99_alone_1500ms_ms": 30,  // 30 requests: the p99 is their maximum
		"crit_p99_after_onset_ms":  20,  // 201 requests from 500 ms, 4 of them 20 ms, 1 50 ms
		"crit_n_after_onset":       201, //
		// From the write: 20 ms written at 12 is 8, 9 written at 1 is 8;
		// the unrecorded write is left out; alone 6 - 0.5 (the cold one
		// is the 1%).
		"crit_p99_after_onset_from_write_ms": 8,
		"crit_p99_alone_from_write_ms":       5.5,
		"crit_write_lag_p99_ms":              12, // 4 of 200 recorded writes
		"crit_p99_after_onset_3s_ms":         9,  // 500 ms-3 s
		"crit_p99_spike_ms":                  40,
		"crit_failed":                        1,
	} {
		if got := r.Extra[k]; got != want {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
}
