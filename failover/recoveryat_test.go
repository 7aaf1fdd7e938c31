package failover

import (
	"path/filepath"
	"testing"
)

// RecoveryAt announces the recovery timer in BACKUP only: zero on
// PRIMARY, the BACKUP entry time plus the recovery timeout in BACKUP, zero
// again once traffic is back on primary.
func TestTransportRecoveryAt(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test", "dc2.test")
	r := newRig(t, l, filepath.Join(t.TempDir(), "failover.json"), nil)
	if at := r.tr.RecoveryAt(); !at.IsZero() {
		t.Fatalf("on PRIMARY: RecoveryAt %v, want zero", at)
	}
	l.down("primary.test")
	for range 3 {
		mustFail(t, r.c, "http://primary.test/a")
	}
	r.ev.want(t, Primary, Failover, ReasonFailures, "primary.test")
	r.ev.want(t, Failover, Backup, ReasonCanarySuccess, "dc1.test")
	if at, want := r.tr.RecoveryAt(), r.clk.Now().Add(DefaultRecoveryTimeout); !at.Equal(want) {
		t.Fatalf("in BACKUP: RecoveryAt %v, want %v", at, want)
	}
	l.up("primary.test")
	r.clk.Advance(DefaultRecoveryTimeout)
	r.ev.want(t, Backup, Recovery, ReasonRecoveryTimer, "dc1.test")
	r.ev.want(t, Recovery, Primary, ReasonRecoverySuccess, "primary.test")
	if at := r.tr.RecoveryAt(); !at.IsZero() {
		t.Fatalf("back on PRIMARY: RecoveryAt %v, want zero", at)
	}
}

// The baselines have no recovery timer: RecoveryAt stays zero.
func TestTransportRecoveryAtBaseline(t *testing.T) {
	l := newLab(t, "primary.test", "dc1.test", "dc2.test")
	r := newRig(t, l, filepath.Join(t.TempDir(), "failover.json"), func(c *Config) { c.Policy = PolicyRoundRobin })
	l.down("primary.test")
	mustFail(t, r.c, "http://primary.test/a")
	if at := r.tr.RecoveryAt(); !at.IsZero() {
		t.Fatalf("round-robin: RecoveryAt %v, want zero", at)
	}
}
