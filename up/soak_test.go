package up

import (
	"strings"
	"testing"
	"time"
)

// The failures outside the windows group into bursts (no two failing
// seconds more than soakBurstGap apart), each placed after the window
// that ended before it and before the next one's start, with the load
// sampled around it; the report prints them and the kinds.
func TestSoakBursts(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	rep := SoakReport{Config: SoakConfig{}.withDefaults(), Start: t0, End: at(400),
		Windows: []SoakWindow{{Name: "w1", From: at(10), To: at(60)}, {Name: "w2", From: at(200), To: at(260)}},
		OutsideFails: []SoakFail{
			{At: at(5), Fail: 1},                         // before any window
			{At: at(70), Fail: 2}, {At: at(80), Fail: 3}, // 10 s apart: one burst
			{At: at(91), Fail: 4},  // 11 s after: another
			{At: at(300), Fail: 5}, // after w2, none next
		},
		OutsideReasons: map[string]int64{"response_timeout": 12, "503 overloaded": 3},
		Samples:        []SoakSample{{At: at(0), Load1: 2}, {At: at(30), Load1: 9}, {At: at(90), Load1: 4}, {At: at(290), Load1: 30}},
		Growth:         map[string]Growth{},
	}
	steps := []struct {
		from, to   int
		fail       int64
		after      string
		sinceAfter int
		before     string
		untilNext  int
	}{
		{5, 5, 1, "", 0, "w1", 5},
		{70, 80, 5, "w1", 10, "w2", 120},
		{91, 91, 4, "w1", 31, "w2", 109},
		{300, 300, 5, "w2", 40, "", 0},
	}
	bs := rep.Bursts()
	if len(bs) != len(steps) {
		t.Fatalf("%d bursts, want %d: %+v", len(bs), len(steps), bs)
	}
	for i, s := range steps {
		b := bs[i]
		if !b.From.Equal(at(s.from)) || !b.To.Equal(at(s.to)) || b.Fail != s.fail || b.After != s.after || b.SinceAfter != time.Duration(s.sinceAfter)*time.Second ||
			b.Before != s.before || b.UntilNext != time.Duration(s.untilNext)*time.Second {
			t.Errorf("burst %d: %+v, want %+v", i, b, s)
		}
	}
	out := rep.String()
	for _, want := range []string{
		"shed and failed by kind: response_timeout 12; 503 overloaded 3;",
		"failed outside 00:17:50-00:18:00 UTC: 5, 10s after w1's window, 2m0s before w2's (load average 4.0)",
		"failed outside 00:21:40-00:21:40 UTC: 5, 40s after w2's window (load average 30.0)",
		"load average (1 min, at the samples): 2.0 to 30.0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// The growth counts only the samples of the whole system: one taken
// while a gateway was stopped (fewer processes reporting goroutines) or a
// child was down (fewer processes) would read as a floor and hide growth.
func TestSoakGrowthSkipsIncompleteSamples(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s, procs, rep, g int) SoakSample {
		return SoakSample{At: t0.Add(time.Duration(s) * time.Second), Procs: procs, Reporting: rep, Goroutines: g, RSS: int64(g)}
	}
	samples := []SoakSample{
		at(0, 9, 3, 1000), at(10, 9, 2, 800), // [0,20): the stopped gateway's 800 is not the floor
		at(20, 9, 3, 1200), at(30, 8, 3, 900), // [20,40): nor a child down
	}
	if got := complete(samples); len(got) != 2 || got[0].Goroutines != 1000 || got[1].Goroutines != 1200 {
		t.Fatalf("complete: %+v", got)
	}
	rep := SoakReport{Config: SoakConfig{WarmUp: time.Nanosecond, GrowthWindow: 20 * time.Second}.withDefaults(), Start: t0.Add(-time.Nanosecond),
		Samples: samples, Growth: map[string]Growth{}, Results: []Result{{Name: "x", Pass: true}}}
	rep.judge()
	if g := rep.Growth["goroutines"]; g.First != 1000 || g.Last != 1200 || g.Windows != 2 || rep.Complete != 2 {
		t.Fatalf("goroutines %+v over %d complete samples, want 1000 -> 1200 over 2", g, rep.Complete)
	}
	if rep.Pass || !strings.Contains(strings.Join(rep.Reasons, ";"), "goroutines grew 20.0%") || !strings.Contains(rep.String(), "4 samples every 30s (2 with every process") {
		t.Fatalf("judge: %v %q\n%s", rep.Pass, rep.Reasons, rep.String())
	}
}
