package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Format is an output format of results.
type Format string

// The output formats.
const (
	FormatTable    Format = "table"
	FormatMarkdown Format = "markdown"
	FormatJSON     Format = "json"
)

// ParseFormat checks a format name.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatTable, FormatMarkdown, FormatJSON:
		return f, nil
	}
	return "", fmt.Errorf("sim: unknown format %q (want table, markdown or json)", s)
}

// Write writes res in format f. JSON is one object per line per result.
func Write(w io.Writer, f Format, res *Result) error {
	switch f {
	case FormatJSON:
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case FormatMarkdown:
		return writeText(w, res, true)
	default:
		return writeText(w, res, false)
	}
}

// table renders rows as aligned text or as a Markdown table.
type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(b *strings.Builder, md bool) {
	width := make([]int, len(t.head))
	for _, r := range append([][]string{t.head}, t.rows...) {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	line := func(r []string) {
		if md {
			b.WriteString("| ")
		}
		for i, c := range r {
			if i > 0 {
				if md {
					b.WriteString(" | ")
				} else {
					b.WriteString("  ")
				}
			}
			pad := strings.Repeat(" ", width[i]-len(c))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		if md {
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	line(t.head)
	if md {
		sep := make([]string, len(t.head))
		for i := range sep {
			sep[i] = strings.Repeat("-", width[i])
			if i > 0 {
				sep[i] = sep[i][:width[i]-1] + ":"
			}
		}
		line(sep)
	}
	for _, r := range t.rows {
		line(r)
	}
}

func pct(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) }

func secs(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1fs", *v)
}

func writeText(w io.Writer, res *Result, md bool) error {
	var b strings.Builder
	title := func(s string) {
		if md {
			b.WriteString("\n**" + s + "**\n\n")
		} else {
			b.WriteString("\n" + s + "\n")
		}
	}
	if md {
		fmt.Fprintf(&b, "### scenario %s (%d sessions, seed %d)\n", res.Scenario, res.Sessions, res.Seed)
	} else {
		fmt.Fprintf(&b, "scenario %s: %d sessions, seed %d, device network error rate %s\n",
			res.Scenario, res.Sessions, res.Seed, pct(res.DeviceErrorRate))
	}
	t := table{head: []string{"strategy", "primary", "backup", "errors", "p50 ms", "p95 ms", "p99 ms", "quic",
		"failovers/session", "p99", "canaries/session", "detect", "recover"}}
	for _, name := range res.Order {
		s := res.Strategies[name]
		t.add(name, pct(s.PrimaryShare), pct(1-s.PrimaryShare), pct(s.ErrorRate),
			fmt.Sprintf("%.1f", s.LatencyMs.P50), fmt.Sprintf("%.1f", s.LatencyMs.P95), fmt.Sprintf("%.1f", s.LatencyMs.P99),
			pct(s.QUICShare), fmt.Sprintf("%.3f", s.FailoversPerSession.Mean), fmt.Sprintf("%.0f", s.FailoversPerSession.P99),
			fmt.Sprintf("%.2f", s.CanariesPerSession), secs(s.DetectSeconds), secs(s.RecoverSeconds))
	}
	t.write(&b, md)

	title("failovers per session (mean) by network condition (share of requests the device's own network failed)")
	ct := table{head: append([]string{"strategy"}, res.Conditions...)}
	sessions := []string{"sessions"}
	for _, c := range res.Conditions {
		sessions = append(sessions, fmt.Sprint(res.Strategies[res.Order[0]].ByCondition[c].Sessions))
	}
	ct.add(sessions...)
	for _, name := range res.Order {
		row := []string{name}
		for _, c := range res.Conditions {
			row = append(row, fmt.Sprintf("%.3f", res.Strategies[name].ByCondition[c].FailoversPerSession.Mean))
		}
		ct.add(row...)
	}
	ct.write(&b, md)

	if res.CarrierOutage {
		writeCarriers(&b, res, md, title)
	}

	if hasOutageTimes(res) {
		title("by traffic class: failovers per session / detect (after first failure) / recover (within 2 recovery periods)")
		lt := table{head: append([]string{"strategy"}, res.Classes...)}
		for _, name := range res.Order {
			row := []string{name}
			for _, c := range res.Classes {
				s := res.Strategies[name].ByClass[c]
				within := ""
				if s.RecoverWithinTwoPeriods != nil {
					within = " (" + pct(*s.RecoverWithinTwoPeriods) + ")"
				}
				row = append(row, fmt.Sprintf("%.3f / %s (%s) / %s%s", s.FailoversPerSession.Mean,
					secs(s.DetectSeconds), secs(s.DetectAfterFirstFailureSeconds), secs(s.RecoverSeconds), within))
			}
			lt.add(row...)
		}
		lt.write(&b, md)
	}

	if s := res.Strategies[res.Order[0]]; s.Phases != nil {
		title("per down phase of flapping outages: detect within the phase / recover before the next one")
		pt := table{head: []string{"strategy", "detect", "detected", "undetected", "recover", "recovered", "unrecovered", "censored"}}
		for _, name := range res.Order {
			p := res.Strategies[name].Phases
			pt.add(name, secs(p.DetectSeconds), fmt.Sprint(p.Detected), fmt.Sprint(p.Undetected),
				secs(p.RecoverSeconds), fmt.Sprint(p.Recovered), fmt.Sprint(p.Unrecovered), fmt.Sprint(p.Censored))
		}
		pt.write(&b, md)
	}

	if base, ok := res.Strategies["roundrobin"]; ok && base.LatencyMs.P99 > 0 {
		sep := "\n"
		for _, name := range []string{Veer.Name, Uber.Name, UberConfirm.Name} {
			if u, ok := res.Strategies[name]; ok {
				fmt.Fprintf(&b, "%s%s vs roundrobin: p99 latency %+.1f%%, p95 %+.1f%%, QUIC share %+.1f points\n",
					sep, name, 100*(u.LatencyMs.P99/base.LatencyMs.P99-1), 100*(u.LatencyMs.P95/base.LatencyMs.P95-1),
					100*(u.QUICShare-base.QUICShare))
				sep = ""
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func hasOutageTimes(res *Result) bool {
	for _, s := range res.Strategies {
		if s.Detected+s.Undetected+s.Recovered+s.Censored > 0 {
			return true
		}
	}
	return false
}

// writeCarriers writes the per-carrier table (figure 4).
func writeCarriers(b *strings.Builder, res *Result, md bool, title func(string)) {
	title("per carrier: backup share / error rate")
	kt := table{head: append([]string{"strategy"}, res.Carriers...)}
	for _, name := range res.Order {
		row := []string{name}
		for _, c := range res.Carriers {
			s := res.Strategies[name].ByCarrier[c]
			row = append(row, fmt.Sprintf("%s / %s", pct(1-s.PrimaryShare), pct(s.ErrorRate)))
		}
		kt.add(row...)
	}
	kt.write(b, md)
}
