package shed

import (
	"errors"
	"strconv"
	"time"

	"github.com/veerhq/veer/tier"
)

// policy is the immutable snapshot the request path reads: the file config
// compiled, plus the admin overrides. A new one is published on every reload
// or admin change.
type policy struct {
	target     time.Duration
	interval   time.Duration
	maxQueue   int
	retryAfter time.Duration
	rejectHold time.Duration // Config.RejectHold when set: every refusal may be held; else 0
	httpHold   time.Duration // the hold of Middleware's HTTP/1.x refusals (pace.go); 0: never
	defTier    tier.Tier
	neverShed  tier.Tier
	trusted    map[string]struct{} // nil: everyone is trusted
	limit      LimitConfig
	endpoints  map[string]*endpointPolicy
	wire       [numReasons]rejectWire // prebuilt HTTP rejections, by reason
}

type endpointPolicy struct {
	limit   *LimitConfig
	defTier tier.Tier
	callers map[string]tier.Tier
}

// tableKey is one cell of the endpoint × caller table.
type tableKey struct{ endpoint, caller string }

func compile(c *Config, overrides map[tableKey]tier.Tier) *policy {
	p := &policy{
		target:     c.Target,
		interval:   c.Interval,
		maxQueue:   c.MaxQueue,
		retryAfter: c.RetryAfter,
		defTier:    c.DefaultTier,
		neverShed:  c.NeverShed,
		limit:      c.Limit,
		endpoints:  map[string]*endpointPolicy{},
	}
	if p.target <= 0 {
		p.target = DefaultTarget
	}
	if p.interval <= 0 {
		p.interval = DefaultInterval
	}
	if p.maxQueue <= 0 {
		p.maxQueue = DefaultMaxQueue
	}
	if p.retryAfter <= 0 {
		p.retryAfter = DefaultRetryAfter
	}
	switch {
	case c.RejectHold > 0:
		p.rejectHold, p.httpHold = c.RejectHold, c.RejectHold
	case c.RejectHold == 0:
		p.httpHold = StormRejectHold
	}
	if !p.defTier.Valid() {
		p.defTier = DefaultTier
	}
	if !p.neverShed.Valid() {
		p.neverShed = tier.Critical
	}
	if len(c.TrustedCallers) > 0 {
		p.trusted = make(map[string]struct{}, len(c.TrustedCallers))
		for _, tc := range c.TrustedCallers {
			p.trusted[tc] = struct{}{}
		}
	}
	for _, e := range c.Endpoints {
		ep := &endpointPolicy{limit: e.Limit, defTier: e.DefaultTier, callers: map[string]tier.Tier{}}
		for caller, t := range e.Callers {
			ep.callers[caller] = t
		}
		p.endpoints[e.Name] = ep
	}
	for r := Reason(0); r < numReasons; r++ {
		p.wire[r] = newRejectWire(p, r)
	}
	for k, t := range overrides {
		ep := p.endpoints[k.endpoint]
		if ep == nil {
			ep = &endpointPolicy{callers: map[string]tier.Tier{}}
			p.endpoints[k.endpoint] = ep
		}
		ep.callers[k.caller] = t
	}
	return p
}

// limitFor returns the limit configuration of an endpoint.
func (p *policy) limitFor(endpoint string) LimitConfig {
	if ep := p.endpoints[endpoint]; ep != nil && ep.limit != nil {
		return *ep.limit
	}
	return p.limit
}

// resolve decides the tier of a request: the stated tier when the caller may
// state one, else the endpoint × caller table, else the endpoint's default,
// else the global default.
func (p *policy) resolve(endpoint, caller string, stated tier.Tier) tier.Tier {
	if stated.Valid() {
		if p.trusted == nil {
			return stated
		}
		if _, ok := p.trusted[caller]; ok {
			return stated
		}
	}
	ep := p.endpoints[endpoint]
	if ep != nil {
		if caller != "" {
			if t, ok := ep.callers[caller]; ok && t.Valid() {
				return t
			}
		}
		if ep.defTier.Valid() {
			return ep.defTier
		}
	}
	return p.defTier
}

// sheddable reports whether requests of tier t may be shed.
func (p *policy) sheddable(t tier.Tier) bool { return t < p.neverShed }

func itoa(i int) string { return strconv.Itoa(i) }

func joinErrs(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errors.Join(errs...)
}
