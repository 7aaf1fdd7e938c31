package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/veerhq/veer/config"
)

// TraceGaps says what a trace's gaps (pauses of at least GapThreshold
// without a delivery opportunity) do to the requests of a session that
// replays it.
//
// By default a gap delays packets as TCP or QUIC would: a packet sent into
// a gap is retransmitted after InitialRTO, then after twice that, and so
// on (exponential backoff, RFC 6298 and RFC 9002); it gets through at the
// first retransmission after the gap ends. A request fails only when that
// delay passes its own timeout (DNS, dial or request timeout). Connections
// survive a gap. OutageAbove restores the first version's model for long
// gaps: a gap at least that long is a full outage (the device is offline,
// connections drop, requests fail after their timeouts), as tunnels are.
type TraceGaps struct {
	// InitialRTO is the first retransmission timeout of a packet sent
	// into a gap. Default 1s (RFC 6298's initial RTO).
	InitialRTO Duration `yaml:"initial_rto" json:"initial_rto"`
	// OutageAbove: gaps at least this long are full outages. Default 0:
	// none; every gap delays. The first version of the simulator treated
	// every gap as an outage: outage_above: 1s.
	OutageAbove Duration `yaml:"outage_above" json:"outage_above"`
}

// DefaultInitialRTO is the default TraceGaps.InitialRTO.
const DefaultInitialRTO = time.Second

func (g TraceGaps) withDefaults() TraceGaps {
	if g.InitialRTO == 0 {
		g.InitialRTO = DefaultInitialRTO
	}
	return g
}

// validateTraces checks the traces section: shares, networks, the gap model,
// shares adding up to at most 1 per network, and loads every trace (so a
// missing, malformed or implausible file is reported against the scenario's
// own line).
func (s *Scenario) validateTraces() error {
	var errs []error
	f := config.Field
	for i, t := range s.Traces {
		p := fmt.Sprintf("traces[%d]", i)
		if t.File == "" {
			errs = append(errs, f(p+".file", "must not be empty"))
		}
		if e := prob(p+".share", t.Share); e != nil {
			errs = append(errs, e)
		}
		for j, n := range t.Networks {
			if s.network(n) < 0 {
				errs = append(errs, f(fmt.Sprintf("%s.networks[%d]", p, j), "unknown network %q", n))
			}
		}
	}
	if g := s.TraceGaps; g.InitialRTO < 0 || g.InitialRTO > time.Minute {
		errs = append(errs, f("trace_gaps.initial_rto", "must be in [0, 1m] (0: default %v), got %v", DefaultInitialRTO, g.InitialRTO))
	}
	if g := s.TraceGaps; g.OutageAbove < 0 || g.OutageAbove > 24*time.Hour {
		errs = append(errs, f("trace_gaps.outage_above", "must be in [0, 24h] (0: never an outage), got %v", g.OutageAbove))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, n := range s.Networks {
		sum, last := 0.0, -1
		for i, t := range s.Traces {
			if len(t.Networks) == 0 || slices.Contains(t.Networks, n.Name) {
				sum += t.Share
				last = i
			}
		}
		if sum > 1+1e-9 {
			errs = append(errs, f(fmt.Sprintf("traces[%d].share", last),
				"the shares of the traces on network %q add up to %.4g: each is a part of that network's sessions, at most 1 in all", n.Name, sum))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	key := s.dir
	for _, t := range s.Traces {
		key += "\x00" + t.File
	}
	if key == s.tracesKey && len(s.traces) == len(s.Traces) {
		return nil // loaded already, from the same files
	}
	s.traces, s.tracesKey = nil, ""
	for i, t := range s.Traces {
		tr, err := loadTrace(t.File, s.dir)
		if err != nil {
			errs = append(errs, f(fmt.Sprintf("traces[%d].file", i), "%w", err))
			continue
		}
		s.traces = append(s.traces, tr)
	}
	if len(errs) > 0 {
		s.traces = nil
	} else {
		s.tracesKey = key
	}
	return errors.Join(errs...)
}

// TraceStats describes one trace of a scenario (veer sim --show and the
// JSON report).
type TraceStats struct {
	File          string  `json:"file"`
	LengthSeconds float64 `json:"length_seconds"`
	Opportunities int     `json:"opportunities"`
	RatePerSecond float64 `json:"rate_per_second"`
	// Gaps counts pauses of at least GapThreshold in one loop;
	// LongestGapSeconds is the longest; GapShare the share of the time
	// in them.
	Gaps              int     `json:"gaps"`
	LongestGapSeconds float64 `json:"longest_gap_seconds"`
	GapShare          float64 `json:"gap_share"`
	// OutageShare is the share of the time in gaps that are full outages
	// under the scenario's trace_gaps.outage_above (0 when it is unset).
	OutageShare float64 `json:"outage_share"`
}

// TraceStats describes the scenario's traces; it loads them if Validate
// has not (ParseScenario validates).
func (s *Scenario) TraceStats() ([]TraceStats, error) {
	if len(s.traces) != len(s.Traces) {
		if err := s.validateTraces(); err != nil {
			return nil, err
		}
	}
	var out []TraceStats
	for i, t := range s.traces {
		st := TraceStats{
			File: s.Traces[i].File, LengthSeconds: t.Period.Seconds(), Opportunities: t.Opportunities,
			RatePerSecond: t.Rate(), Gaps: len(t.Gaps), LongestGapSeconds: t.Longest().Seconds(), GapShare: t.OutageShare(),
		}
		if a := s.TraceGaps.OutageAbove; a > 0 {
			st.OutageShare = t.ShareAbove(a)
		}
		out = append(out, st)
	}
	return out, nil
}

// stallDelay is how long a packet sent at t into the stall [from, to)
// waits: its retransmissions go out at t + rto·(2^k − 1), k = 1, 2, ...;
// the first at or after to gets through.
func stallDelay(t, to, rto int64) int64 {
	for d := rto; ; d = 2*d + rto {
		if t+d >= to {
			return d
		}
		if d > 1<<50 { // beyond any timeout
			return d
		}
	}
}
