package sim

import (
	"errors"
	"path/filepath"
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
	// TraceGaps says what the traces' gaps do to requests. Default: they
	// delay packets (retransmission with exponential backoff from a 1s
	// RTO); none is a full outage.
	TraceGaps TraceGaps `yaml:"trace_gaps" json:"trace_gaps"`
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
	// Failover is the policy configuration every strategy gets: the very
	// failover.Config of the Transport (one source for every tunable; zero
	// fields take failover's defaults). Domains come from the domains
	// section; the policy and confirm_primary are what tell the strategies
	// apart; canary_path, canary_scheme and failure_statuses are not
	// simulated. Setting any of these here is an error naming the field.
	Failover failover.Config `yaml:"failover" json:"failover"`

	// dir resolves trace files; traces holds them once Validate loaded
	// them (ParseScenario sets dir from the file name).
	dir       string
	traces    []*Trace
	tracesKey string // dir and files the traces were loaded from
}

// PolicyConfig returns the scenario's failover.Config with the domains
// filled in (primary first): what every strategy starts from.
func (s *Scenario) PolicyConfig() failover.Config {
	c := s.Failover
	c.Primary = s.Domains.Primary.Name
	c.Backups = nil
	for _, b := range s.Domains.Backups {
		c.Backups = append(c.Backups, b.Name)
	}
	return c
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
// delivery opportunity for at least one second) from a random offset.
type TraceSpec struct {
	// File is a path (relative to the scenario file) or the name of a
	// bundled trace ("lte-drive", "3g-commute").
	File string `yaml:"file" json:"file"`
	// Share of the sessions on Networks that replay the trace. Shares of
	// the traces on one network are independent parts of its sessions
	// (two traces at 0.5 each: half the sessions replay one, half the
	// other), so they may add up to at most 1 per network.
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

// ErrUnknownScenario is returned for a bundled scenario name that does not
// exist.
var ErrUnknownScenario = errors.New("sim: unknown scenario")

// ParseScenario decodes a scenario file over Default() and validates it.
// name is used in error messages.
func ParseScenario(data []byte, name string) (*Scenario, error) {
	s := Default()
	s.dir = filepath.Dir(name)
	if err := config.Parse(data, name, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
