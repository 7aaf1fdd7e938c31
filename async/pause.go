package async

import (
	"context"
	"time"
)

// Pause stops starting invocations of a group (tenant "") or of a tenant
// (group ""); those running finish. The pause is recorded in the engine
// (asyncnats: a JetStream key-value bucket), so every gateway on the same
// store honours it within one consumption interval, and a restart keeps
// it. Resume undoes it.
func (s *Service) Pause(ctx context.Context, group, tenant string) error {
	return s.setPaused(ctx, group, tenant, true)
}

// Resume lets a paused group or tenant run again (on every gateway).
func (s *Service) Resume(ctx context.Context, group, tenant string) error {
	return s.setPaused(ctx, group, tenant, false)
}

func pauseKey(group, tenant string) string {
	if group != "" {
		return "g:" + group
	}
	return "t:" + tenant
}

func (s *Service) setPaused(ctx context.Context, group, tenant string, p bool) error {
	k := pauseKey(group, tenant)
	if err := s.eng.SetPaused(ctx, k, p); err != nil {
		return err
	}
	s.pmu.Lock()
	defer s.pmu.Unlock()
	s.pgen++ // a refresh read before this write must not undo it
	if p {
		s.pauses[k] = true
	} else {
		delete(s.pauses, k)
	}
	return nil
}

func (s *Service) paused(group, tenant string) bool {
	s.pmu.RLock()
	defer s.pmu.RUnlock()
	return len(s.pauses) > 0 && s.pauses[pauseKey(group, tenant)]
}

// refreshPauses reads the pauses in force from the engine: what another
// gateway paused or resumed. On error the last known set stays.
func (s *Service) refreshPauses(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s.pmu.RLock()
	gen := s.pgen
	s.pmu.RUnlock()
	m, err := s.eng.Paused(ctx)
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("async: reading the shared pauses failed; keeping the last known", "err", err)
		}
		return
	}
	s.pmu.Lock()
	if s.pgen == gen {
		s.pauses = m
	}
	s.pmu.Unlock()
}

// watchPauses refreshes the pauses every consumption interval until Close.
func (s *Service) watchPauses() {
	t := s.clk.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			s.refreshPauses(s.ctx)
		case <-s.ctx.Done():
			return
		}
	}
}
