// Package plot draws the charts of a simulation result (package sim) as PNG
// and SVG files with gonum/plot, one chart per published figure of seed
// 000: traffic distribution per strategy (figure 1), tail latency and QUIC
// share (figure 2), failover events per session by network condition
// (figure 3), and per-carrier backup share and error rate (figure 4).
//
// It lives apart from package sim so that the simulator core does not pull
// in gonum and its font and image dependencies.
//
// Failure mode: Write returns the first error creating a chart or a file;
// files written before it stay.
package plot

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/veerhq/veer/sim"
)

// Size of every chart.
const (
	Width  = 16 * vg.Centimeter
	Height = 10 * vg.Centimeter
)

// Charts lists the chart names Write produces for every result; every chart
// is written as <scenario>-<chart>.png and .svg. A scenario with an outage
// scoped to carriers also gets CarrierCharts.
var Charts = []string{"traffic", "latency", "quic", "failovers", "carrier-backup", "carrier-errors", "timeline", "timeline-errors"}

// CarrierCharts are the per-minute charts of the affected carriers against
// the others (figure 4).
var CarrierCharts = []string{"carrier-timeline", "carrier-timeline-errors"}

// ChartsFor returns the charts Write draws for res.
func ChartsFor(res *sim.Result) []string {
	if len(res.AffectedCarriers) > 0 {
		return append(slices.Clone(Charts), CarrierCharts...)
	}
	return Charts
}

// Write draws every chart of res into dir (created if needed) and returns
// the paths written.
func Write(dir string, res *sim.Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, name := range ChartsFor(res) {
		p, err := chart(name, res)
		if err != nil {
			return files, fmt.Errorf("plot %s %s: %w", res.Scenario, name, err)
		}
		for _, ext := range []string{"png", "svg"} {
			f := filepath.Join(dir, fmt.Sprintf("%s-%s.%s", res.Scenario, name, ext))
			if err := p.Save(Width, Height, f); err != nil {
				return files, fmt.Errorf("plot %s: %w", f, err)
			}
			files = append(files, f)
		}
	}
	return files, nil
}

func chart(name string, res *sim.Result) (*gplot.Plot, error) {
	switch name {
	case "traffic":
		return traffic(res)
	case "latency":
		return latency(res)
	case "quic":
		return single(res, "QUIC share of successful requests (figure 2)", "share", func(s *sim.StrategyResult) float64 { return s.QUICShare })
	case "failovers":
		return grouped(res, "Failover events per session by network condition (figure 3)",
			"network error rate of the session", "failovers per session (mean)", res.Conditions,
			func(s *sim.StrategyResult, g string) float64 { return s.ByCondition[g].FailoversPerSession.Mean })
	case "carrier-backup":
		return grouped(res, "Share of traffic on backups per carrier (figure 4)", "carrier", "backup share", res.Carriers,
			func(s *sim.StrategyResult, g string) float64 { return 1 - s.ByCarrier[g].PrimaryShare })
	case "carrier-errors":
		return grouped(res, "Error rate per carrier (figure 4)", "carrier", "error rate", res.Carriers,
			func(s *sim.StrategyResult, g string) float64 { return s.ByCarrier[g].ErrorRate })
	case "timeline":
		return timeline(res, "Share of requests on primary per minute", "primary share", false,
			func(s *sim.StrategyResult) []series { return []series{{"", s.Timeline, false}} })
	case "timeline-errors":
		return timeline(res, "Error rate per minute", "error rate", true,
			func(s *sim.StrategyResult) []series { return []series{{"", s.Timeline, false}} })
	case "carrier-timeline":
		return timeline(res, "Share of requests on backups per minute, affected carriers vs others (figure 4)", "backup share", false, carrierSeries(res))
	case "carrier-timeline-errors":
		return timeline(res, "Error rate per minute, affected carriers vs others (figure 4)", "error rate", true, carrierSeries(res))
	}
	return nil, fmt.Errorf("unknown chart %q", name)
}

func newPlot(res *sim.Result, title, x, y string) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = fmt.Sprintf("%s\nscenario %s, %d sessions, seed %d", title, res.Scenario, res.Sessions, res.Seed)
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Y.Min = 0
	p.Legend.Top = true
	return p
}

// traffic stacks each domain's share of requests per strategy.
func traffic(res *sim.Result) (*gplot.Plot, error) {
	p := newPlot(res, "Traffic distribution (figures 1a, 1b)", "strategy", "share of requests")
	var below *plotter.BarChart
	for i, d := range res.Domains {
		v := make(plotter.Values, len(res.Order))
		for j, name := range res.Order {
			v[j] = res.Strategies[name].DomainShare[d]
		}
		b, err := plotter.NewBarChart(v, vg.Points(40))
		if err != nil {
			return nil, err
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		if below != nil {
			b.StackOn(below)
		}
		below = b
		p.Add(b)
		p.Legend.Add(d, b)
	}
	p.Y.Max = 1.3
	p.NominalX(res.Order...)
	return p, nil
}

// latency groups p50, p95 and p99 per strategy.
func latency(res *sim.Result) (*gplot.Plot, error) {
	p := newPlot(res, "Latency of successful requests (figure 2)", "percentile", "milliseconds")
	groups := []string{"p50", "p95", "p99"}
	return bars(p, res, groups, func(s *sim.StrategyResult, g string) float64 {
		switch g {
		case "p50":
			return s.LatencyMs.P50
		case "p95":
			return s.LatencyMs.P95
		}
		return s.LatencyMs.P99
	})
}

func single(res *sim.Result, title, y string, get func(*sim.StrategyResult) float64) (*gplot.Plot, error) {
	p := newPlot(res, title, "strategy", y)
	v := make(plotter.Values, len(res.Order))
	for j, name := range res.Order {
		v[j] = get(res.Strategies[name])
	}
	b, err := plotter.NewBarChart(v, vg.Points(40))
	if err != nil {
		return nil, err
	}
	b.Color = color.RGBA{R: 0x33, G: 0x66, B: 0x99, A: 0xff}
	p.Add(b)
	p.NominalX(res.Order...)
	return p, nil
}

func grouped(res *sim.Result, title, x, y string, groups []string, get func(*sim.StrategyResult, string) float64) (*gplot.Plot, error) {
	return bars(newPlot(res, title, x, y), res, groups, get)
}

// bars draws one bar per strategy side by side in each group.
func bars(p *gplot.Plot, res *sim.Result, groups []string, get func(*sim.StrategyResult, string) float64) (*gplot.Plot, error) {
	n := len(res.Order)
	w := vg.Points(float64(min(60, 360/max(1, len(groups)))) / float64(n))
	top := 0.0
	for i, name := range res.Order {
		v := make(plotter.Values, len(groups))
		for j, g := range groups {
			v[j] = get(res.Strategies[name], g)
			top = max(top, v[j])
		}
		b, err := plotter.NewBarChart(v, w)
		if err != nil {
			return nil, err
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(n-1)/2)
		p.Add(b)
		p.Legend.Add(name, b)
	}
	// Head room for the legend above the tallest bar.
	p.Y.Max = max(top*1.35, 1e-9)
	p.NominalX(groups...)
	return p, nil
}

// series is one line of a timeline chart; dashed lines are the reference
// group.
type series struct {
	label  string
	tl     *sim.Timeline
	dashed bool
}

// carrierSeries returns, per strategy, the summed timeline of the affected
// carriers (solid) and of the others (dashed).
func carrierSeries(res *sim.Result) func(*sim.StrategyResult) []series {
	return func(s *sim.StrategyResult) []series {
		var hit, rest []*sim.Timeline
		for _, c := range res.Carriers {
			if slices.Contains(res.AffectedCarriers, c) {
				hit = append(hit, s.CarrierTimeline[c])
			} else {
				rest = append(rest, s.CarrierTimeline[c])
			}
		}
		return []series{
			{strings.Join(res.AffectedCarriers, "+"), sumTimelines(hit), false},
			{"others", sumTimelines(rest), true},
		}
	}
}

// sumTimelines adds timelines minute by minute, weighting shares by
// requests.
func sumTimelines(ts []*sim.Timeline) *sim.Timeline {
	type acc struct{ req, prim, errs float64 }
	byMinute := map[int]*acc{}
	for _, t := range ts {
		if t == nil {
			continue
		}
		for i, m := range t.Minute {
			a := byMinute[m]
			if a == nil {
				a = &acc{}
				byMinute[m] = a
			}
			r := float64(t.Requests[i])
			a.req += r
			a.prim += r * t.PrimaryShare[i]
			a.errs += r * t.ErrorRate[i]
		}
	}
	out := &sim.Timeline{}
	minutes := make([]int, 0, len(byMinute))
	for m := range byMinute {
		minutes = append(minutes, m)
	}
	slices.Sort(minutes)
	for _, m := range minutes {
		a := byMinute[m]
		out.Minute = append(out.Minute, m)
		out.Requests = append(out.Requests, int64(a.req))
		out.PrimaryShare = append(out.PrimaryShare, a.prim/a.req)
		out.ErrorRate = append(out.ErrorRate, a.errs/a.req)
	}
	return out
}

// timeline draws one line per strategy and series over the minutes of the
// horizon, with the outage windows marked by grey vertical lines. Minutes
// with fewer than 20 requests are left out (too noisy to read).
func timeline(res *sim.Result, title, y string, errs bool, get func(*sim.StrategyResult) []series) (*gplot.Plot, error) {
	p := newPlot(res, title, "minute of the horizon", y)
	top := 0.0
	for i, name := range res.Order {
		for _, sr := range get(res.Strategies[name]) {
			var xys plotter.XYs
			for j, m := range sr.tl.Minute {
				if sr.tl.Requests[j] < 20 {
					continue
				}
				v := sr.tl.ErrorRate[j]
				if !errs {
					v = sr.tl.PrimaryShare[j]
					if len(res.AffectedCarriers) > 0 && sr.label != "" {
						v = 1 - v
					}
				}
				top = max(top, v)
				xys = append(xys, plotter.XY{X: float64(m) + 0.5, Y: v})
			}
			if len(xys) == 0 {
				continue
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1.2)
			if sr.dashed {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(l)
			label := name
			if sr.label != "" {
				label += " " + sr.label
			}
			p.Legend.Add(label, l)
		}
	}
	p.Y.Max = max(top*1.35, 1e-9)
	for _, w := range res.Outages {
		for _, x := range []float64{w.From, w.To} {
			l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: p.Y.Max}})
			if err != nil {
				return nil, err
			}
			l.Color = color.Gray{Y: 0x99}
			l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			p.Add(l)
		}
	}
	p.Legend.Left = true
	return p, nil
}
