package async

// Pause stops starting invocations of a group (tenant "") or of a tenant
// (group ""), in this process; those running finish. Resume undoes it.
func (s *Service) Pause(group, tenant string) { s.setPaused(group, tenant, true) }

// Resume lets a paused group or tenant run again.
func (s *Service) Resume(group, tenant string) { s.setPaused(group, tenant, false) }

func pauseKey(group, tenant string) string {
	if group != "" {
		return "g:" + group
	}
	return "t:" + tenant
}

func (s *Service) setPaused(group, tenant string, p bool) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if p {
		s.pauses[pauseKey(group, tenant)] = true
	} else {
		delete(s.pauses, pauseKey(group, tenant))
	}
}

func (s *Service) paused(group, tenant string) bool {
	s.pmu.RLock()
	defer s.pmu.RUnlock()
	return len(s.pauses) > 0 && s.pauses[pauseKey(group, tenant)]
}
