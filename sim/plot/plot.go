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

// Charts lists the chart names Write produces for each result; every chart
// is written as <scenario>-<chart>.png and .svg.
var Charts = []string{"traffic", "latency", "quic", "failovers", "carrier-backup", "carrier-errors"}

// Write draws every chart of res into dir (created if needed) and returns
// the paths written.
func Write(dir string, res *sim.Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, name := range Charts {
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
