package limitredis

import (
	"errors"

	"github.com/veerhq/veer/config"
)

// Apply replaces the shared limits (Config.Limits) and Config.Instances at
// run time: the next decision uses them, through Redis and in the local
// fallback (whose key state is kept, see limit.Limiter.Apply). Keys in
// Redis are untouched: a key whose limits change keeps its theoretical
// arrival time and its leases. An invalid cfg is an error naming the field
// and changes nothing; so is a change of prefix, timeout, lease_ttl or
// probe_interval, which cannot change at run time (the keys, the batches
// in flight and the timers depend on them): it names the field and changes
// nothing either. It is the reload function for config/watch:
//
//	watch.File(path, watch.Options{}, l.Apply)
func (l *Limiter) Apply(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	var errs []error
	if cfg.Prefix != l.cfg.Prefix {
		errs = append(errs, config.Field("prefix", "cannot change at run time (%q in force)", l.cfg.Prefix))
	}
	if cfg.Timeout != l.cfg.Timeout {
		errs = append(errs, config.Field("timeout", "cannot change at run time (%v in force)", l.cfg.Timeout))
	}
	if cfg.LeaseTTL != l.cfg.LeaseTTL {
		errs = append(errs, config.Field("lease_ttl", "cannot change at run time (%v in force)", l.cfg.LeaseTTL))
	}
	if cfg.ProbeInterval != l.cfg.ProbeInterval {
		errs = append(errs, config.Field("probe_interval", "cannot change at run time (%v in force)", l.cfg.ProbeInterval))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.applyMu.Lock()
	defer l.applyMu.Unlock()
	if err := l.local.Apply(cfg.Limits.Scale(cfg.Instances)); err != nil {
		return config.In("limits", err)
	}
	l.snap.Store(newLimits(cfg))
	return nil
}
