package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/failover"
)

// Scenario is one simulated evaluation: a population of sessions, the
// networks they use, the domains they talk to, the outages they meet and the
// failover configuration every strategy shares. It is read from YAML (or
// JSON) by ParseScenario, which starts from Default(): a field a file does
// not mention keeps its default, a list a file gives replaces the default
// list. The zero Scenario is not runnable (it has no networks or traffic):
// start from Default(), as ParseScenario does. docs/sim.md explains every
// model and why its defaults are plausible.
type Scenario struct {
	// Name identifies the scenario in output. Default "default".
	Name string `yaml:"name" json:"name"`
	// Description is a one-line summary shown by "veer sim --list".
	Description string `yaml:"description" json:"description"`
	// Sessions is the number of sessions simulated when the command line
	// does not say. Default 5000.
	Sessions int `yaml:"sessions" json:"sessions"`
	// Seed seeds every random stream when the command line does not say.
	// Default 1.
	Seed uint64 `yaml:"seed" json:"seed"`
	// Horizon is the interval over which sessions start (uniformly).
	// Outage times are measured from its beginning. Default 1h.
	Horizon Duration `yaml:"horizon" json:"horizon"`
	// Session describes session length and in-session events.
	Session SessionSpec `yaml:"session" json:"session"`
	// Traffic is the list of app classes with their request processes.
	// Default: "normal" (85%, a busy and a quiet phase) and "low" (15%,
	// one request every two minutes).
	Traffic []TrafficClass `yaml:"traffic" json:"traffic"`
	// Networks are the network types a device uses, with their shares
	// and loss models. Default: wifi, lte, 3g.
	Networks []Network `yaml:"networks" json:"networks"`
	// QualitySigma spreads network quality between sessions: each session
	// draws a multiplier q (log-normal, median 1, this sigma) that scales
	// its bad-state and tunnel frequencies. Default 1.0.
	QualitySigma float64 `yaml:"quality_sigma" json:"quality_sigma"`
	// Tunnels is the duration range of tunnel/elevator outages, drawn
	// log-uniformly. Default 2s..60s.
	Tunnels Range `yaml:"tunnels" json:"tunnels"`
	// Traces replays connectivity gaps of Mahimahi traces for a share of
	// sessions. Default none.
	Traces []TraceSpec `yaml:"traces" json:"traces"`
	// Carriers and Regions are session attributes outages can be scoped
	// to. Defaults: carriers C1..C8, regions east/west/central.
	Carriers []Weighted `yaml:"carriers" json:"carriers"`
	Regions  []Weighted `yaml:"regions" json:"regions"`
	// Domains are the primary (index 0) and the backups.
	Domains Domains `yaml:"domains" json:"domains"`
	// Server is the server's own time to answer a request.
	Server ServerSpec `yaml:"server" json:"server"`
	// Timeouts of the client's network stack.
	Timeouts Timeouts `yaml:"timeouts" json:"timeouts"`
	// Outages of domains, scoped to parts of the population.
	Outages []Outage `yaml:"outages" json:"outages"`
	// Failover is the policy configuration every strategy gets.
	Failover PolicySpec `yaml:"failover" json:"failover"`
}

// Duration is a time.Duration written as "1m30s" in files.
type Duration = time.Duration

// SessionSpec describes how long sessions last and what happens inside one.
type SessionSpec struct {
	// DurationMin and DurationMax bound the uniform session length.
	// Defaults 10m and 50m (mean 30m).
	DurationMin Duration `yaml:"duration_min" json:"duration_min"`
	DurationMax Duration `yaml:"duration_max" json:"duration_max"`
	// RelaunchesPerHour is the Poisson rate of app relaunches within a
	// session (the app is killed and started again, with the persisted
	// backup domain). Default 0.5.
	RelaunchesPerHour float64 `yaml:"relaunches_per_hour" json:"relaunches_per_hour"`
	// NetworkChangesPerHour is the Poisson rate of switches to another
	// network type (Wi-Fi to cellular and back). Default 0.5.
	NetworkChangesPerHour float64 `yaml:"network_changes_per_hour" json:"network_changes_per_hour"`
}

// TrafficClass is a class of app sessions with a phased Poisson request
// process: the phases repeat in order, each lasting an exponential time with
// its mean, with Poisson arrivals at its rate.
type TrafficClass struct {
	Name   string  `yaml:"name" json:"name"`
	Share  float64 `yaml:"share" json:"share"`
	Phases []Phase `yaml:"phases" json:"phases"`
}

// Phase is one phase of a traffic class.
type Phase struct {
	// RatePerMinute is the mean number of requests per minute.
	RatePerMinute float64 `yaml:"rate_per_minute" json:"rate_per_minute"`
	// MeanDuration is the mean (exponential) length of the phase.
	MeanDuration Duration `yaml:"mean_duration" json:"mean_duration"`
}

// Network is a network type with its share, latency and loss model.
type Network struct {
	Name  string  `yaml:"name" json:"name"`
	Share float64 `yaml:"share" json:"share"`
	// RTT is the median round trip from the device to the nearest
	// point of presence.
	RTT Duration `yaml:"rtt" json:"rtt"`
	// JitterSigma is the sigma of a log-normal factor on each request's
	// round trips.
	JitterSigma float64 `yaml:"jitter_sigma" json:"jitter_sigma"`
	// GoodMean and BadMean are the mean sojourns of the Gilbert-Elliott
	// good and bad states (exponential, continuous time).
	GoodMean Duration `yaml:"good_mean" json:"good_mean"`
	BadMean  Duration `yaml:"bad_mean" json:"bad_mean"`
	// LossGood and LossBad are the probabilities that a request fails in
	// the network in each state.
	LossGood float64 `yaml:"loss_good" json:"loss_good"`
	LossBad  float64 `yaml:"loss_bad" json:"loss_bad"`
	// RetransmitBad is the probability that a successful request in the
	// bad state needed a retransmission (TCP: an RTO; QUIC: a probe
	// timeout without head-of-line blocking).
	RetransmitBad float64 `yaml:"retransmit_bad" json:"retransmit_bad"`
	// TunnelsPerHour is the Poisson rate of full outages of the device's
	// connectivity (tunnels, elevators, lifts), before the session's
	// quality multiplier.
	TunnelsPerHour float64 `yaml:"tunnels_per_hour" json:"tunnels_per_hour"`
	// QUICBlocked is the probability that this network blocks UDP, so the
	// client falls back to TCP even on the primary.
	QUICBlocked float64 `yaml:"quic_blocked" json:"quic_blocked"`
}

// Range is an interval of durations.
type Range struct {
	Min Duration `yaml:"min" json:"min"`
	Max Duration `yaml:"max" json:"max"`
}

// TraceSpec assigns a Mahimahi trace to a share of sessions on the named
// networks: each such session replays the trace's connectivity gaps (no
// delivery opportunity for at least one second) from a random offset, as
// full outages.
type TraceSpec struct {
	// File is a path (relative to the scenario file) or the name of a
	// bundled trace ("lte-drive", "3g-commute").
	File string `yaml:"file" json:"file"`
	// Share of the sessions on Networks that replay the trace.
	Share float64 `yaml:"share" json:"share"`
	// Networks the trace applies to; empty: all.
	Networks []string `yaml:"networks" json:"networks"`
}

// Weighted is a named share.
type Weighted struct {
	Name  string  `yaml:"name" json:"name"`
	Share float64 `yaml:"share" json:"share"`
	// Quality multiplies the network-quality multiplier of the sessions
	// of this carrier or region (above 1: more bad periods and tunnels).
	// Default 0, meaning 1: every carrier and region alike.
	Quality float64 `yaml:"quality" json:"quality"`
}

// Domains lists the primary and the backups.
type Domains struct {
	Primary Domain   `yaml:"primary" json:"primary"`
	Backups []Domain `yaml:"backups" json:"backups"`
}

// Domain is a destination of regular traffic.
type Domain struct {
	Name string `yaml:"name" json:"name"`
	// ExtraRTT is added to the network's RTT: the distance from the
	// point of presence to this domain's servers.
	ExtraRTT Duration `yaml:"extra_rtt" json:"extra_rtt"`
	// QUIC says whether the domain serves HTTP/3.
	QUIC bool `yaml:"quic" json:"quic"`
}

// ServerSpec is the server's processing time, log-normal.
type ServerSpec struct {
	// Median server time. Default 60ms.
	Median Duration `yaml:"median" json:"median"`
	// Sigma of the log-normal. Default 0.5.
	Sigma float64 `yaml:"sigma" json:"sigma"`
	// Canary is the time the health endpoint takes. Default 5ms.
	Canary Duration `yaml:"canary" json:"canary"`
}

// Timeouts of the client.
type Timeouts struct {
	// DNS lookup timeout. Default 5s.
	DNS Duration `yaml:"dns" json:"dns"`
	// Dial (TCP/QUIC connect) timeout. Default 10s.
	Dial Duration `yaml:"dial" json:"dial"`
	// Request timeout waiting for the response. Default 10s.
	Request Duration `yaml:"request" json:"request"`
	// Idle is how long an unused connection stays open. Default 90s.
	Idle Duration `yaml:"idle" json:"idle"`
	// DNSTTL is how long a resolved name is cached. Default 60s.
	DNSTTL Duration `yaml:"dns_ttl" json:"dns_ttl"`
	// TCPRTOMin is the minimum TCP retransmission timeout. Default 200ms.
	TCPRTOMin Duration `yaml:"tcp_rto_min" json:"tcp_rto_min"`
}

// Outage makes some domains fail for part of the population over a window.
type Outage struct {
	Name string `yaml:"name" json:"name"`
	// Start and End are measured from the beginning of the horizon.
	Start Duration `yaml:"start" json:"start"`
	End   Duration `yaml:"end" json:"end"`
	// Kind is dns_failure, dns_timeout, connect_refused, connect_timeout,
	// tls_failure or server_error (a reachable server answering 5xx,
	// which failover must not count as a network failure).
	Kind string `yaml:"kind" json:"kind"`
	// Domains affected by name or "primary"/"backups"; default primary.
	Domains []string `yaml:"domains" json:"domains"`
	// Scope: empty lists mean everyone.
	Carriers []string `yaml:"carriers" json:"carriers"`
	Regions  []string `yaml:"regions" json:"regions"`
	Networks []string `yaml:"networks" json:"networks"`
	// Flap, when set, makes the outage cycle down/up within the window.
	Flap *Flap `yaml:"flap" json:"flap"`
}

// Flap is an up/down cycle; the window starts with a down phase.
type Flap struct {
	Down Duration `yaml:"down" json:"down"`
	Up   Duration `yaml:"up" json:"up"`
}

// PolicySpec is the failover configuration shared by every strategy; each
// field is the failover.Config field of the same name (see its
// documentation for meaning and default); zero fields take the failover
// package's defaults. Domains come from the scenario's domains section.
// ConfirmPrimary is not a scenario field: it is what tells the uber-confirm
// strategy from uber, so that both always run under the same settings.
type PolicySpec struct {
	FailureThreshold    int      `yaml:"failure_threshold" json:"failure_threshold"`
	FailureWindow       Duration `yaml:"failure_window" json:"failure_window"`
	FailureTimeout      Duration `yaml:"failure_timeout" json:"failure_timeout"`
	RecoveryTimeout     Duration `yaml:"recovery_timeout" json:"recovery_timeout"`
	RecoveryTimeoutStep Duration `yaml:"recovery_timeout_step" json:"recovery_timeout_step"`
	RecoveryTimeoutMax  Duration `yaml:"recovery_timeout_max" json:"recovery_timeout_max"`
	RecoveryDecay       Duration `yaml:"recovery_decay" json:"recovery_decay"`
	CanaryTimeout       Duration `yaml:"canary_timeout" json:"canary_timeout"`
	CanaryRetryInterval Duration `yaml:"canary_retry_interval" json:"canary_retry_interval"`
	CanaryRetryMax      Duration `yaml:"canary_retry_max" json:"canary_retry_max"`
	DeviceOfflineCheck  bool     `yaml:"device_offline_check" json:"device_offline_check"`
}

// Config returns the failover.Config for the given domain names (primary
// first).
func (p PolicySpec) Config(domains []string) failover.Config {
	c := failover.Config{
		FailureThreshold:    p.FailureThreshold,
		FailureWindow:       p.FailureWindow,
		FailureTimeout:      p.FailureTimeout,
		RecoveryTimeout:     p.RecoveryTimeout,
		RecoveryTimeoutStep: p.RecoveryTimeoutStep,
		RecoveryTimeoutMax:  p.RecoveryTimeoutMax,
		RecoveryDecay:       p.RecoveryDecay,
		CanaryTimeout:       p.CanaryTimeout,
		CanaryRetryInterval: p.CanaryRetryInterval,
		CanaryRetryMax:      p.CanaryRetryMax,
		DeviceOfflineCheck:  p.DeviceOfflineCheck,
	}
	if len(domains) > 0 {
		c.Primary = domains[0]
		c.Backups = domains[1:]
	}
	return c
}

// Outage kinds.
const (
	KindDNSFailure     = "dns_failure"
	KindDNSTimeout     = "dns_timeout"
	KindConnectRefused = "connect_refused"
	KindConnectTimeout = "connect_timeout"
	KindTLSFailure     = "tls_failure"
	KindServerError    = "server_error"
)

var outageKinds = []string{KindDNSFailure, KindDNSTimeout, KindConnectRefused, KindConnectTimeout, KindTLSFailure, KindServerError}

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
		Failover: PolicySpec{
			FailureThreshold:    3,
			FailureWindow:       10 * time.Second,
			FailureTimeout:      30 * time.Second,
			RecoveryTimeout:     10 * time.Second,
			RecoveryTimeoutStep: 10 * time.Second,
			CanaryTimeout:       3 * time.Second,
		},
	}
}

// ErrUnknownScenario is returned for a bundled scenario name that does not
// exist.
var ErrUnknownScenario = errors.New("sim: unknown scenario")

// ParseScenario decodes a scenario file over Default() and validates it.
// name is used in error messages.
func ParseScenario(data []byte, name string) (*Scenario, error) {
	s := Default()
	if err := config.Parse(data, name, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate checks the scenario; errors name the field.
func (s *Scenario) Validate() error {
	var errs []error
	add := func(e error) {
		if e != nil {
			errs = append(errs, e)
		}
	}
	f := config.Field
	if s.Name == "" {
		add(f("name", "must not be empty"))
	}
	if s.Sessions < 1 || s.Sessions > 10_000_000 {
		add(f("sessions", "must be between 1 and 10000000, got %d", s.Sessions))
	}
	if s.Horizon <= 0 || s.Horizon > 30*24*time.Hour {
		add(f("horizon", "must be positive and at most 720h, got %v", s.Horizon))
	}
	ss := s.Session
	if ss.DurationMin <= 0 || ss.DurationMax < ss.DurationMin || ss.DurationMax > 24*time.Hour {
		add(f("session.duration_min", "need 0 < duration_min <= duration_max <= 24h, got %v..%v", ss.DurationMin, ss.DurationMax))
	}
	add(rate("session.relaunches_per_hour", ss.RelaunchesPerHour))
	add(rate("session.network_changes_per_hour", ss.NetworkChangesPerHour))
	if len(s.Traffic) == 0 {
		add(f("traffic", "needs at least one class"))
	}
	for i, c := range s.Traffic {
		p := fmt.Sprintf("traffic[%d]", i)
		if c.Name == "" {
			add(f(p+".name", "must not be empty"))
		}
		for j := range i {
			if s.Traffic[j].Name == c.Name {
				add(f(p+".name", "duplicate class %q", c.Name))
			}
		}
		add(share(p+".share", c.Share))
		if len(c.Phases) == 0 {
			add(f(p+".phases", "needs at least one phase"))
		}
		for j, ph := range c.Phases {
			q := fmt.Sprintf("%s.phases[%d]", p, j)
			if ph.RatePerMinute < 0 || ph.RatePerMinute > 6000 {
				add(f(q+".rate_per_minute", "must be between 0 and 6000, got %v", ph.RatePerMinute))
			}
			if ph.MeanDuration < time.Second {
				add(f(q+".mean_duration", "must be at least 1s, got %v", ph.MeanDuration))
			}
		}
	}
	add(sharesSum("traffic", len(s.Traffic), func(i int) float64 { return s.Traffic[i].Share }))
	if len(s.Networks) == 0 {
		add(f("networks", "needs at least one network"))
	}
	for i, n := range s.Networks {
		p := fmt.Sprintf("networks[%d]", i)
		if n.Name == "" {
			add(f(p+".name", "must not be empty"))
		}
		for j := range i {
			if s.Networks[j].Name == n.Name {
				add(f(p+".name", "duplicate network %q", n.Name))
			}
		}
		add(share(p+".share", n.Share))
		if n.RTT <= 0 || n.RTT > 10*time.Second {
			add(f(p+".rtt", "must be in (0, 10s], got %v", n.RTT))
		}
		if n.JitterSigma < 0 || n.JitterSigma > 3 {
			add(f(p+".jitter_sigma", "must be in [0, 3], got %v", n.JitterSigma))
		}
		if n.GoodMean < time.Millisecond {
			add(f(p+".good_mean", "must be at least 1ms, got %v", n.GoodMean))
		}
		if n.BadMean < time.Millisecond {
			add(f(p+".bad_mean", "must be at least 1ms, got %v", n.BadMean))
		}
		add(prob(p+".loss_good", n.LossGood))
		add(prob(p+".loss_bad", n.LossBad))
		add(prob(p+".retransmit_bad", n.RetransmitBad))
		add(prob(p+".quic_blocked", n.QUICBlocked))
		add(rate(p+".tunnels_per_hour", n.TunnelsPerHour))
	}
	add(sharesSum("networks", len(s.Networks), func(i int) float64 { return s.Networks[i].Share }))
	if s.QualitySigma < 0 || s.QualitySigma > 3 {
		add(f("quality_sigma", "must be in [0, 3], got %v", s.QualitySigma))
	}
	if s.Tunnels.Min <= 0 || s.Tunnels.Max < s.Tunnels.Min || s.Tunnels.Max > 24*time.Hour {
		add(f("tunnels.min", "need 0 < min <= max <= 24h, got %v..%v", s.Tunnels.Min, s.Tunnels.Max))
	}
	for i, t := range s.Traces {
		p := fmt.Sprintf("traces[%d]", i)
		if t.File == "" {
			add(f(p+".file", "must not be empty"))
		}
		add(prob(p+".share", t.Share))
		for j, n := range t.Networks {
			if s.network(n) < 0 {
				add(f(fmt.Sprintf("%s.networks[%d]", p, j), "unknown network %q", n))
			}
		}
	}
	add(names("carriers", s.Carriers))
	add(names("regions", s.Regions))
	if s.Domains.Primary.Name == "" {
		add(f("domains.primary.name", "must not be empty"))
	}
	if len(s.Domains.Backups) == 0 || len(s.Domains.Backups) > 16 {
		add(f("domains.backups", "needs 1 to 16 backups, got %d", len(s.Domains.Backups)))
	}
	for i, d := range s.domains() {
		p := "domains.primary"
		if i > 0 {
			p = fmt.Sprintf("domains.backups[%d]", i-1)
			if d.Name == "" {
				add(f(p+".name", "must not be empty"))
			}
		}
		for j := range i {
			if d.Name != "" && s.domains()[j].Name == d.Name {
				add(f(p+".name", "duplicate domain %q", d.Name))
			}
		}
		if d.ExtraRTT < 0 || d.ExtraRTT > 10*time.Second {
			add(f(p+".extra_rtt", "must be in [0, 10s], got %v", d.ExtraRTT))
		}
	}
	if s.Server.Median <= 0 || s.Server.Median > time.Minute {
		add(f("server.median", "must be in (0, 1m], got %v", s.Server.Median))
	}
	if s.Server.Sigma < 0 || s.Server.Sigma > 3 {
		add(f("server.sigma", "must be in [0, 3], got %v", s.Server.Sigma))
	}
	if s.Server.Canary < 0 || s.Server.Canary > time.Minute {
		add(f("server.canary", "must be in [0, 1m], got %v", s.Server.Canary))
	}
	for _, t := range []struct {
		name string
		d    Duration
	}{{"dns", s.Timeouts.DNS}, {"dial", s.Timeouts.Dial}, {"request", s.Timeouts.Request},
		{"idle", s.Timeouts.Idle}, {"dns_ttl", s.Timeouts.DNSTTL}, {"tcp_rto_min", s.Timeouts.TCPRTOMin}} {
		if t.d <= 0 || t.d > time.Hour {
			add(f("timeouts."+t.name, "must be in (0, 1h], got %v", t.d))
		}
	}
	for i, o := range s.Outages {
		add(config.In(fmt.Sprintf("outages[%d]", i), s.validateOutage(o)))
	}
	if len(errs) == 0 {
		// Domain names are checked by failover.Config as hosts.
		var names []string
		for _, d := range s.domains() {
			names = append(names, d.Name)
		}
		add(config.In("failover", s.Failover.Config(names).Validate()))
	}
	return errors.Join(errs...)
}

func (s *Scenario) validateOutage(o Outage) error {
	var errs []error
	f := config.Field
	if o.Start < 0 || o.End <= o.Start || o.End > 60*24*time.Hour {
		errs = append(errs, f("start", "need 0 <= start < end <= 1440h, got %v..%v", o.Start, o.End))
	}
	known := false
	for _, k := range outageKinds {
		known = known || k == o.Kind
	}
	if !known {
		errs = append(errs, f("kind", "unknown kind %q (want one of %v)", o.Kind, outageKinds))
	}
	for i, d := range o.Domains {
		if d != "primary" && d != "backups" && s.domainIndex(d) < 0 {
			errs = append(errs, f(fmt.Sprintf("domains[%d]", i), "unknown domain %q", d))
		}
	}
	check := func(field string, vals []string, ok func(string) bool) {
		for i, v := range vals {
			if !ok(v) {
				errs = append(errs, f(fmt.Sprintf("%s[%d]", field, i), "unknown %s %q", field[:len(field)-1], v))
			}
		}
	}
	check("carriers", o.Carriers, func(v string) bool { return weightedIndex(s.Carriers, v) >= 0 })
	check("regions", o.Regions, func(v string) bool { return weightedIndex(s.Regions, v) >= 0 })
	check("networks", o.Networks, func(v string) bool { return s.network(v) >= 0 })
	if o.Flap != nil && (o.Flap.Down < time.Second || o.Flap.Up < time.Second) {
		errs = append(errs, f("flap", "down and up must be at least 1s, got %v/%v", o.Flap.Down, o.Flap.Up))
	}
	return errors.Join(errs...)
}

func (s *Scenario) domains() []Domain {
	return append([]Domain{s.Domains.Primary}, s.Domains.Backups...)
}

func (s *Scenario) domainIndex(name string) int {
	for i, d := range s.domains() {
		if d.Name == name {
			return i
		}
	}
	return -1
}

func (s *Scenario) network(name string) int {
	for i, n := range s.Networks {
		if n.Name == name {
			return i
		}
	}
	return -1
}

func weightedIndex(ws []Weighted, name string) int {
	for i, w := range ws {
		if w.Name == name {
			return i
		}
	}
	return -1
}

func names(field string, ws []Weighted) error {
	if len(ws) == 0 || len(ws) > 64 {
		return config.Field(field, "needs 1 to 64 entries, got %d", len(ws))
	}
	var errs []error
	for i, w := range ws {
		p := fmt.Sprintf("%s[%d]", field, i)
		if w.Name == "" {
			errs = append(errs, config.Field(p+".name", "must not be empty"))
		}
		for j := range i {
			if ws[j].Name == w.Name {
				errs = append(errs, config.Field(p+".name", "duplicate %q", w.Name))
			}
		}
		if e := share(p+".share", w.Share); e != nil {
			errs = append(errs, e)
		}
		if !(w.Quality >= 0 && w.Quality <= 100) {
			errs = append(errs, config.Field(p+".quality", "must be between 0 and 100, got %v", w.Quality))
		}
	}
	if e := sharesSum(field, len(ws), func(i int) float64 { return ws[i].Share }); e != nil {
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

func share(field string, v float64) error {
	if !(v >= 0 && v <= 1e6) {
		return config.Field(field, "must be a non-negative weight, got %v", v)
	}
	return nil
}

func sharesSum(field string, n int, get func(int) float64) error {
	if n == 0 {
		return nil
	}
	total := 0.0
	for i := range n {
		total += get(i)
	}
	if !(total > 0) {
		return config.Field(field, "shares must not all be zero")
	}
	return nil
}

func prob(field string, v float64) error {
	if !(v >= 0 && v <= 1) {
		return config.Field(field, "must be a probability in [0, 1], got %v", v)
	}
	return nil
}

func rate(field string, v float64) error {
	if !(v >= 0 && v <= 3600) {
		return config.Field(field, "must be between 0 and 3600 per hour, got %v", v)
	}
	return nil
}
