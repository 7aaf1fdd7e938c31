package sim

import (
	"time"
)

// Default returns the default mix: the population, networks and domains
// docs/sim.md describes, with no domain outage.
func Default() Scenario {
	return Scenario{
		Name:     "default",
		Sessions: 5000,
		Seed:     1,
		Horizon:  time.Hour,
		Session: SessionSpec{
			DurationMin:           10 * time.Minute,
			DurationMax:           50 * time.Minute,
			RelaunchesPerHour:     0.5,
			NetworkChangesPerHour: 0.5,
		},
		Traffic: []TrafficClass{
			{Name: "normal", Share: 0.85, Phases: []Phase{
				{RatePerMinute: 30, MeanDuration: 3 * time.Minute},
				{RatePerMinute: 4, MeanDuration: 7 * time.Minute},
			}},
			{Name: "low", Share: 0.15, Phases: []Phase{
				{RatePerMinute: 0.5, MeanDuration: time.Hour},
			}},
		},
		Networks: []Network{
			{Name: "wifi", Share: 0.35, RTT: 25 * time.Millisecond, JitterSigma: 0.35,
				GoodMean: 15 * time.Minute, BadMean: 10 * time.Second, LossGood: 0.002, LossBad: 0.25,
				RetransmitBad: 0.3, TunnelsPerHour: 0.2, QUICBlocked: 0.08},
			{Name: "lte", Share: 0.5, RTT: 55 * time.Millisecond, JitterSigma: 0.4,
				GoodMean: 8 * time.Minute, BadMean: 15 * time.Second, LossGood: 0.003, LossBad: 0.3,
				RetransmitBad: 0.4, TunnelsPerHour: 1.5, QUICBlocked: 0.03},
			{Name: "3g", Share: 0.15, RTT: 150 * time.Millisecond, JitterSigma: 0.5,
				GoodMean: 4 * time.Minute, BadMean: 30 * time.Second, LossGood: 0.01, LossBad: 0.4,
				RetransmitBad: 0.5, TunnelsPerHour: 2, QUICBlocked: 0.05},
		},
		QualitySigma: 1.0,
		Tunnels:      Range{Min: 2 * time.Second, Max: time.Minute},
		Carriers: []Weighted{
			{"C1", 0.22, 0}, {"C2", 0.18, 0}, {"C3", 0.15, 0}, {"C4", 0.12, 0},
			{"C5", 0.11, 0}, {"C6", 0.09, 0}, {"C7", 0.08, 0}, {"C8", 0.05, 0},
		},
		Regions: []Weighted{{"east", 0.45, 0}, {"west", 0.35, 0}, {"central", 0.2, 0}},
		Domains: Domains{
			Primary: Domain{Name: "edge", ExtraRTT: 5 * time.Millisecond, QUIC: true},
			Backups: []Domain{
				{Name: "dc1", ExtraRTT: 60 * time.Millisecond},
				{Name: "dc2", ExtraRTT: 110 * time.Millisecond},
			},
		},
		Server: ServerSpec{Median: 60 * time.Millisecond, Sigma: 0.5, Canary: 5 * time.Millisecond},
		Timeouts: Timeouts{
			DNS: 5 * time.Second, Dial: 10 * time.Second, Request: 10 * time.Second,
			Idle: 90 * time.Second, DNSTTL: time.Minute, TCPRTOMin: 200 * time.Millisecond,
		},
		// Failover: the zero failover.Config, i.e. failover's defaults.
	}
}
