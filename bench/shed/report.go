package shed

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/veerhq/veer/tier"
)

// Result is one contender's figures in one scenario.
type Result struct {
	Scenario  string `json:"scenario"`
	Contender string `json:"contender"`
	Round     int    `json:"round"`
	// CapacityRPS is the server's measured capacity for the handler.
	CapacityRPS float64 `json:"capacity_rps"`
	// OfferedRPS is the load of the measured phase.
	OfferedRPS float64 `json:"offered_rps"`
	// Goodput is responses with 200 within the client deadline that
	// completed in the measured phase (whenever they were sent), per second
	// of it: what the server delivered in that time. GoodputBySend counts
	// the 200s of requests sent in the measured phase instead, including
	// those the server finished after it; a server that queues an overload
	// and works it off in the lighter phase that follows scores the whole
	// offered load there (the bench's goodput up to 2026-12-01).
	Goodput       float64 `json:"goodput_rps"`
	GoodputBySend float64 `json:"goodput_by_send_rps"`
	// P50Ms and P99Ms are latencies of admitted (200) requests, measured
	// from the intended send time.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// Success is the fraction of requests answered 200 in time, per tier.
	Success map[string]float64 `json:"success_by_tier"`
	// ShedRate is the fraction answered 503; ErrRate the fraction with no
	// answer in time (timeouts, transport errors).
	ShedRate float64 `json:"shed_rate"`
	ErrRate  float64 `json:"err_rate"`
	// DetectMs is the time from the start of the measured phase to the
	// first 503 (-1: none). RecoverMs is the time from its end to the last
	// 503 or admitted response slower than 100 ms (-1: no recovery phase;
	// 0: clean at once).
	DetectMs  float64 `json:"detect_ms"`
	RecoverMs float64 `json:"recover_ms"`
	// OrderViolations counts seconds in which a sheddable_plus request was
	// shed while a sheddable one was admitted (by intended send time);
	// extra order_viol_after_onset leaves out the seconds that hold the
	// first OnsetWindow of the measured phase.
	OrderViolations int `json:"order_violations"`
	// CPUUsPerReq is server CPU (user+sys) per request received, in µs;
	// CPUCorePct the server CPU over the wall time of the run.
	CPUUsPerReq float64 `json:"cpu_us_per_req"`
	CPUCorePct  float64 `json:"cpu_core_pct"`
	// Extra holds scenario-specific figures.
	Extra map[string]float64 `json:"extra,omitempty"`
}

// OnsetWindow is the start of the measured phase that the steady-state p99
// (extra p99_ms_after_onset) leaves out: the time a detector needs to see an
// overload that began at once.
const OnsetWindow = 500 * time.Millisecond

// Analyze computes the figures of a run.
func Analyze(phases []Phase, samples []Sample) Result {
	r := Result{Success: map[string]float64{}, DetectMs: -1, RecoverMs: -1, Extra: map[string]float64{}}
	var mStart, mEnd time.Duration
	mIdx := -1
	var off time.Duration
	for i, ph := range phases {
		if ph.Measure {
			mIdx, mStart, mEnd = i, off, off+ph.Dur
			for _, st := range ph.Streams {
				r.OfferedRPS += st.Rate
			}
		}
		off += ph.Dur
	}
	var lat []time.Duration
	latBy := map[tier.Tier][]time.Duration{}
	var latSteady []time.Duration
	sent := map[tier.Tier]int{}
	ok := map[tier.Tier]int{}
	var n, shed, errs, good, done, warmShed int
	type sec struct{ plusShed, lowOK bool }
	secs := map[int]*sec{}
	for _, s := range samples {
		if end := s.At + s.Latency; s.Status == http.StatusOK && end >= mStart && end < mEnd {
			done++
		}
		if s.Status == http.StatusServiceUnavailable && s.At >= mStart {
			if d := float64(s.At-mStart) / 1e6; r.DetectMs < 0 || d < r.DetectMs {
				r.DetectMs = d
			}
		}
		if s.At >= mEnd && mIdx >= 0 && mIdx < len(phases)-1 {
			if r.RecoverMs < 0 {
				r.RecoverMs = 0
			}
			if s.Status != http.StatusOK || s.Latency > 100*time.Millisecond {
				r.RecoverMs = max(r.RecoverMs, float64(s.At-mEnd)/1e6)
			}
		}
		b := int(s.At / time.Second)
		if secs[b] == nil {
			secs[b] = &sec{}
		}
		if s.Tier == tier.SheddablePlus && s.Status == http.StatusServiceUnavailable {
			secs[b].plusShed = true
		}
		if s.Tier == tier.Sheddable && s.Status == http.StatusOK {
			secs[b].lowOK = true
		}
		if s.Phase < mIdx && s.Status == http.StatusServiceUnavailable {
			warmShed++
		}
		if s.Phase != mIdx {
			continue
		}
		n++
		sent[s.Tier]++
		switch s.Status {
		case http.StatusOK:
			good++
			ok[s.Tier]++
			lat = append(lat, s.Latency)
			latBy[s.Tier] = append(latBy[s.Tier], s.Latency)
			if s.At >= mStart+OnsetWindow {
				latSteady = append(latSteady, s.Latency)
			}
		case http.StatusServiceUnavailable:
			shed++
		default:
			errs++
		}
	}
	inOnset := 0
	for b, s := range secs {
		if !s.plusShed || !s.lowOK {
			continue
		}
		r.OrderViolations++
		start := time.Duration(b) * time.Second
		if start+time.Second > mStart && start < mStart+OnsetWindow {
			inOnset++ // the second holds the overload's onset
		}
	}
	r.Extra["order_viol_after_onset"] = float64(r.OrderViolations - inOnset)
	r.Extra["warm_sheds"] = float64(warmShed)
	if n > 0 {
		r.ShedRate = float64(shed) / float64(n)
		r.ErrRate = float64(errs) / float64(n)
		r.GoodputBySend = float64(good) / (mEnd - mStart).Seconds()
	}
	if mEnd > mStart {
		r.Goodput = float64(done) / (mEnd - mStart).Seconds()
	}
	for t, c := range sent {
		r.Success[t.String()] = float64(ok[t]) / float64(c)
	}
	r.P50Ms, r.P99Ms = pct(lat, 0.5), pct(lat, 0.99)
	r.Extra["p99_ms_after_onset"] = pct(latSteady, 0.99)
	if len(latBy) > 1 {
		for t, l := range latBy {
			r.Extra["p99_ms_"+t.String()] = pct(l, 0.99)
		}
	}
	return r
}

// StreamStats returns the p99 (ms) of admitted requests and the number of
// failed requests of one stream in one phase.
func StreamStats(samples []Sample, phase int, stream string) (p99 float64, failed, total int) {
	var lat []time.Duration
	for _, s := range samples {
		if s.Phase != phase || s.Stream != stream {
			continue
		}
		total++
		if s.Status == http.StatusOK {
			lat = append(lat, s.Latency)
		} else {
			failed++
		}
	}
	return pct(lat, 0.99), failed, total
}

// pct returns the q-quantile in ms, or -1 when there is no sample.
func pct(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return -1
	}
	slices.Sort(ds)
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return float64(ds[max(0, i)]) / 1e6
}

// WriteJSON writes the results as a JSON array.
func WriteJSON(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rs)
}

// WriteTable writes one table per scenario.
func WriteTable(w io.Writer, rs []Result) {
	var order []string
	by := map[string][]Result{}
	for _, r := range rs {
		if _, ok := by[r.Scenario]; !ok {
			order = append(order, r.Scenario)
		}
		by[r.Scenario] = append(by[r.Scenario], r)
	}
	for _, sc := range order {
		lo, hi := by[sc][0].CapacityRPS, by[sc][0].CapacityRPS
		for _, r := range by[sc] {
			lo, hi = min(lo, r.CapacityRPS), max(hi, r.CapacityRPS)
		}
		capacity := fmt.Sprintf("%.0f rps", lo)
		if math.Round(hi) != math.Round(lo) {
			// Each row is a median round, with the capacity measured
			// before that round.
			capacity = fmt.Sprintf("%.0f-%.0f rps by row", lo, hi)
		}
		fmt.Fprintf(w, "\n## %s (capacity %s, offered %.0f rps)\n", sc, capacity, by[sc][0].OfferedRPS)
		tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "contender\tgoodput/cap\tby send\tp50 ms\tp99 ms\tok crit+\tok crit\tok shed+\tok shed\tshed\terr\tdetect ms\trecover ms\torder viol\tcpu µs/req\tcpu %\textra\t")
		for _, r := range by[sc] {
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t%.1f%%\t%s\t%s\t%d\t%.0f\t%.1f\t%s\t\n",
				r.Contender, r.Goodput/r.CapacityRPS, r.GoodputBySend/r.CapacityRPS, ms(r.P50Ms), ms(r.P99Ms),
				frac(r.Success, "critical_plus"), frac(r.Success, "critical"), frac(r.Success, "sheddable_plus"), frac(r.Success, "sheddable"),
				100*r.ShedRate, 100*r.ErrRate, ms(r.DetectMs), ms(r.RecoverMs), r.OrderViolations, r.CPUUsPerReq, r.CPUCorePct, extra(r.Extra))
		}
		tw.Flush()
	}
}

func frac(m map[string]float64, k string) string {
	v, ok := m[k]
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

func ms(v float64) string {
	if v < 0 {
		return "-"
	}
	if v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func extra(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%.1f", k, m[k]))
	}
	return strings.Join(parts, " ")
}
