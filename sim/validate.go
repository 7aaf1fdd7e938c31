package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/veerhq/veer/config"
)

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
		add(s.validateFailover())
	}
	if len(errs) == 0 {
		add(s.validateTraces())
	}
	return errors.Join(errs...)
}

// validateFailover checks the failover section: the fields the simulator
// sets itself, or does not simulate, must be left out; the rest is checked
// by failover.Config.Validate, domains included.
func (s *Scenario) validateFailover() error {
	var errs []error
	c := s.Failover
	for _, f := range []struct {
		name, why string
		set       bool
	}{
		{"primary", "set by domains.primary.name", c.Primary != ""},
		{"backups", "set by domains.backups", len(c.Backups) > 0},
		{"policy", "chosen by the strategy (veer sim --strategy)", c.Policy != ""},
		{"confirm_primary", "chosen by the strategy (uber-confirm, veer)", c.ConfirmPrimary},
		{"canary_path", "not simulated", c.CanaryPath != ""},
		{"canary_scheme", "not simulated", c.CanaryScheme != ""},
		{"failure_statuses", "not simulated (server_error outages carry no status code)", len(c.FailureStatuses) > 0},
	} {
		if f.set {
			errs = append(errs, config.Field("failover."+f.name, "must not be set in a scenario: %s", f.why))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return config.In("failover", s.PolicyConfig().Validate())
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
