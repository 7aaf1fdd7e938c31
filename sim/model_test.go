package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// modelOnly builds a model of one network with the given loss and outage
// parameters and one constant-rate traffic class.
func modelOnly(t *testing.T, n Network, ratePerMinute float64) *model {
	t.Helper()
	sc := Default()
	n.Name, n.Share = "n", 1
	if n.RTT == 0 {
		n.RTT = 50 * time.Millisecond
	}
	sc.Networks = []Network{n}
	sc.QualitySigma = 0
	sc.Session = SessionSpec{DurationMin: 30 * time.Minute, DurationMax: 30 * time.Minute}
	sc.Traffic = []TrafficClass{{Name: "c", Share: 1, Phases: []Phase{{RatePerMinute: ratePerMinute, MeanDuration: time.Hour}}}}
	m, err := compile(&sc, "")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func within(t *testing.T, what string, got, want, relTol float64) {
	t.Helper()
	if math.Abs(got-want) > relTol*want {
		t.Errorf("%s = %.5f, want %.5f ± %.0f%%", what, got, want, 100*relTol)
	} else {
		t.Logf("%s = %.5f (closed form %.5f)", what, got, want)
	}
}

func TestGilbertElliottLongRunLoss(t *testing.T) {
	gm, bm := 60*time.Second, 20*time.Second
	lg, lb := 0.01, 0.4
	m := modelOnly(t, Network{GoodMean: gm, BadMean: bm, LossGood: lg, LossBad: lb}, 30)
	var r realisation
	var reqs, bad, lost int
	for i := range 2000 {
		m.generate(&r, 42, i)
		for _, q := range r.reqs {
			reqs++
			if q.flags&flagBad != 0 {
				bad++
			}
			if q.flags&flagLost != 0 {
				lost++
			}
		}
	}
	pb := float64(bm) / float64(gm+bm)
	// Poisson arrivals see time averages (PASTA), so the share of
	// requests in the bad state is the stationary probability.
	within(t, "share of requests in the bad state", float64(bad)/float64(reqs), pb, 0.04)
	within(t, "long-run loss rate", float64(lost)/float64(reqs), pb*lb+(1-pb)*lg, 0.04)
}

func TestTunnelsOfflineShare(t *testing.T) {
	m := modelOnly(t, Network{GoodMean: time.Hour, BadMean: time.Millisecond, TunnelsPerHour: 6}, 30)
	var r realisation
	var offline, reqs int
	for i := range 3000 {
		m.generate(&r, 7, i)
		for _, q := range r.reqs {
			reqs++
			if q.flags&flagOffline != 0 {
				offline++
			}
		}
		for _, d := range r.down {
			if l := time.Duration(d.to - d.from); l > time.Minute {
				t.Fatalf("tunnel of %v (merged) longer than expected", l)
			}
		}
	}
	// Log-uniform durations on [2s, 60s]: mean (60-2)/ln(30) s.
	mean := 58 / math.Log(30)
	within(t, "offline share", float64(offline)/float64(reqs), 6*mean/3600, 0.1)
}

func TestPhasedPoissonRate(t *testing.T) {
	sc := Default()
	sc.Traffic = sc.Traffic[:1] // "normal": 30/min for 3m, 4/min for 7m
	sc.Traffic[0].Share = 1
	sc.Session = SessionSpec{DurationMin: 30 * time.Minute, DurationMax: 30 * time.Minute}
	m, err := compile(&sc, "")
	if err != nil {
		t.Fatal(err)
	}
	var r realisation
	total := 0
	const n = 3000
	for i := range n {
		m.generate(&r, 3, i)
		if !slices.IsSortedFunc(r.reqs, func(a, b request) int { return cmpInt64(a.t, b.t) }) {
			t.Fatal("arrivals not sorted")
		}
		for _, q := range r.reqs {
			if q.t < r.start || q.t >= r.end {
				t.Fatalf("arrival %d outside the session [%d, %d)", q.t, r.start, r.end)
			}
		}
		total += len(r.reqs)
	}
	within(t, "requests per 30-minute session", float64(total)/n, 30*(30*3+4*7)/10.0, 0.03)
}

func TestQualitySpreadsSessions(t *testing.T) {
	sc := Default()
	m, err := compile(&sc, "")
	if err != nil {
		t.Fatal(err)
	}
	var r realisation
	buckets := make([]int, len(ConditionNames))
	for i := range 2000 {
		m.generate(&r, 1, i)
		buckets[condition(r.devErrors, len(r.reqs))]++
	}
	for i, b := range buckets {
		if b == 0 {
			t.Errorf("condition bucket %s is empty: %v", ConditionNames[i], buckets)
		}
	}
}

func TestParseTrace(t *testing.T) {
	tr, err := ParseTrace([]byte("0\n500\n\n2000\n2100\n4000\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	if tr.Period != 4000*ms || tr.Opportunities != 5 {
		t.Fatalf("period %v, %d opportunities", tr.Period, tr.Opportunities)
	}
	if want := []Interval{{500 * ms, 2000 * ms}, {2100 * ms, 4000 * ms}}; !slices.Equal(tr.Gaps, want) {
		t.Fatalf("gaps %v, want %v", tr.Gaps, want)
	}
	base := int64(10 * time.Second)
	_, got := tr.gapsIn(nil, nil, base, int64(1000*ms), int64(8000*ms), 0)
	M := int64(ms)
	want := []span{
		{base, base + 1000*M}, {base + 1100*M, base + 3000*M},
		{base + 3500*M, base + 5000*M}, {base + 5100*M, base + 7000*M},
		{base + 7500*M, base + 8000*M},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("replayed gaps\n got %v\nwant %v", got, want)
	}
	// A trace starting late has a wrap-around gap at the loop start.
	tr, err = ParseTrace([]byte("1500\n3000\n"), "t")
	if err != nil || len(tr.Gaps) != 2 || tr.Gaps[0] != (Interval{0, 1500 * ms}) {
		t.Fatalf("wrap-around: %v %v", tr, err)
	}
	for _, bad := range []string{"", "0\n", "12\nabc\n", "5\n3\n", "-1\n"} {
		if _, err := ParseTrace([]byte(bad), "bad"); !errors.Is(err, ErrTrace) {
			t.Errorf("ParseTrace(%q) = %v, want ErrTrace", bad, err)
		}
	}
}

func TestBundledTraces(t *testing.T) {
	for _, name := range []string{"lte-drive", "3g-commute"} {
		tr, err := loadTrace(name, "")
		if err != nil {
			t.Fatal(err)
		}
		share := tr.OutageShare()
		if len(tr.Gaps) < 5 || share < 0.05 || share > 0.3 {
			t.Errorf("%s: %d gaps, outage share %.3f", name, len(tr.Gaps), share)
		}
		for _, g := range tr.Gaps {
			if g.To-g.From < GapThreshold {
				t.Errorf("%s: gap %v shorter than the threshold", name, g)
			}
		}
	}
}

func TestHistQuantiles(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	var h hist
	var vs []float64
	for range 200000 {
		v := int64(math.Exp(rnd.NormFloat64()*1.2 + 11)) // µs, median ~60ms
		h.add(v)
		vs = append(vs, float64(v))
	}
	slices.Sort(vs)
	for _, q := range []float64{0.5, 0.95, 0.99} {
		exact := vs[int(q*float64(len(vs)))-1]
		within(t, "quantile", h.quantile(q), exact, 0.016)
	}
	for i := range 5000 {
		if lo := histLow(histIndex(int64(i))); lo > int64(i) || histIndex(lo) != histIndex(int64(i)) {
			t.Fatalf("bucket of %d starts at %d", i, lo)
		}
	}
}

func FuzzParseTrace(f *testing.F) {
	f.Add([]byte("0\n500\n2000\n2100\n4000\n"))
	f.Add([]byte("1500\n3000\n"))
	f.Add([]byte("12\nx\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ParseTrace(data, "fuzz")
		if err != nil {
			if !errors.Is(err, ErrTrace) {
				t.Fatalf("error %v does not wrap ErrTrace", err)
			}
			return
		}
		if tr.Period <= 0 {
			t.Fatalf("period %v", tr.Period)
		}
		prev := time.Duration(-1)
		for _, g := range tr.Gaps {
			if g.To-g.From < GapThreshold || g.From < prev || g.To > tr.Period {
				t.Fatalf("bad gap %v in %v", g, tr.Gaps)
			}
			prev = g.To
		}
		if s := tr.OutageShare(); s < 0 || s > 1 {
			t.Fatalf("outage share %v", s)
		}
	})
}

func TestCarrierQuality(t *testing.T) {
	sc := Default()
	sc.Carriers = []Weighted{{Name: "good", Share: 1, Quality: 0.5}, {Name: "bad", Share: 1, Quality: 3}}
	m, err := compile(&sc, "")
	if err != nil {
		t.Fatal(err)
	}
	var r realisation
	var reqs, errs [2]int
	for i := range 2000 {
		m.generate(&r, 5, i)
		reqs[r.carrier] += len(r.reqs)
		errs[r.carrier] += r.devErrors
	}
	good, bad := float64(errs[0])/float64(reqs[0]), float64(errs[1])/float64(reqs[1])
	if bad < 2*good {
		t.Errorf("device error rate: quality 3 carrier %.4f, quality 0.5 carrier %.4f", bad, good)
	}
}
