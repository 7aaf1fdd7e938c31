package failover

import (
	"testing"
	"time"

	"github.com/veerhq/veer/outcome"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestUberSteps(t *testing.T) {
	n := None
	confirm := func(c *Config) { c.ConfirmPrimary = true }
	cases := []struct {
		name  string
		cfg   func(*Config)
		steps []step
	}{
		{"X failures within Y: failover, first canary wins, recovery back", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(2), rep(0, dnsFail), Primary, 0, n, sec(31), ReasonNone},
			{sec(3), rep(0, timeout), Failover, 0, 1, noWake, ReasonFailures},
			{sec(4), can(1, ok), Backup, 1, n, sec(14), ReasonCanarySuccess},
			{sec(5), rep(1, ok), Backup, 1, n, sec(14), ReasonNone},
			{sec(13), tick(), Backup, 1, n, sec(14), ReasonNone}, // early tick: nothing
			{sec(14), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(15), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"failures spread wider than Y do not trigger", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{sec(6), rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{sec(12), rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{sec(13), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures}, // 6,12,13 within 10s
		}},
		{"a success breaks the streak", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(2), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(3), rep(0, ok), Primary, 0, n, noWake, ReasonNone},
			{sec(4), rep(0, refused), Primary, 0, n, sec(34), ReasonNone},
			{sec(5), rep(0, refused), Primary, 0, n, sec(34), ReasonNone},
			{sec(6), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
		}},
		{"HTTP errors from a reachable server are not failures", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, srvError), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, outcome.Overloaded), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, outcome.Limited), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, outcome.ClientError), Primary, 0, n, noWake, ReasonNone},
			{sec(2), rep(0, refused), Primary, 0, n, sec(32), ReasonNone},
			{sec(3), rep(0, refused), Primary, 0, n, sec(32), ReasonNone},
			{sec(4), rep(0, srvError), Primary, 0, n, noWake, ReasonNone}, // server reached: streak over
			{sec(5), rep(0, refused), Primary, 0, n, sec(35), ReasonNone},
		}},
		{"client cancellations are ignored", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(2), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(3), rep(0, outcome.ClientCanceled), Primary, 0, n, sec(31), ReasonNone},
			{sec(4), rep(0, outcome.ResponseTimeout), Failover, 0, 1, noWake, ReasonFailures},
		}},
		{"low traffic: a streak older than T fails over on the timer", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(5), rep(0, refused), Primary, 0, n, sec(35), ReasonNone},
			{sec(34), tick(), Primary, 0, n, sec(35), ReasonNone},
			{sec(35), tick(), Failover, 0, 1, noWake, ReasonStreakTimeout},
		}},
		{"low traffic: a failure after T fails over at once", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(5), rep(0, refused), Primary, 0, n, sec(35), ReasonNone},
			{sec(40), rep(0, refused), Failover, 0, 1, noWake, ReasonStreakTimeout},
		}},
		{"canaries walk the backup list in order", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), rep(0, refused), Failover, 0, n, noWake, ReasonNone}, // still probing
			{sec(3), can(1, timeout), Failover, 0, 2, noWake, ReasonNone},
			{sec(4), can(2, ok), Backup, 2, n, sec(14), ReasonCanarySuccess},
		}},
		{"a failed round waits and starts again", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, refused), Failover, 0, n, sec(7), ReasonNone},
			{sec(6), tick(), Failover, 0, n, sec(7), ReasonNone},
			{sec(7), tick(), Failover, 0, 1, noWake, ReasonNone},
			{sec(8), can(1, ok), Backup, 1, n, sec(18), ReasonCanarySuccess},
		}},
		{"failed rounds back off: 5s, 10s, 20s, then the 20s cap; a state change resets", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, timeout), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, timeout), Failover, 0, n, sec(7), ReasonNone}, // +5s
			{sec(7), tick(), Failover, 0, 1, noWake, ReasonNone},
			{sec(8), can(1, timeout), Failover, 0, 2, noWake, ReasonNone},
			{sec(9), can(2, timeout), Failover, 0, n, sec(19), ReasonNone}, // +10s
			{sec(19), tick(), Failover, 0, 1, noWake, ReasonNone},
			{sec(20), can(1, timeout), Failover, 0, 2, noWake, ReasonNone},
			{sec(21), can(2, timeout), Failover, 0, n, sec(41), ReasonNone}, // +20s
			{sec(41), tick(), Failover, 0, 1, noWake, ReasonNone},
			{sec(42), can(1, timeout), Failover, 0, 2, noWake, ReasonNone},
			{sec(43), can(2, timeout), Failover, 0, n, sec(63), ReasonNone}, // cap
			{sec(50), rep(0, ok), Primary, 0, n, noWake, ReasonPrimarySuccess},
			// a new FAILOVER starts again from CanaryRetryInterval
			{sec(60), rep(0, refused), Primary, 0, n, sec(90), ReasonNone},
			{sec(60), rep(0, refused), Primary, 0, n, sec(90), ReasonNone},
			{sec(60), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(61), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(62), can(2, refused), Failover, 0, n, sec(67), ReasonNone}, // +5s again
		}},
		{"backoff resets through BACKUP too", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, refused), Failover, 0, n, sec(7), ReasonNone},
			{sec(7), tick(), Failover, 0, 1, noWake, ReasonNone},
			{sec(8), can(1, ok), Backup, 1, n, sec(18), ReasonCanarySuccess},
			{sec(18), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(19), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
			{sec(20), rep(0, refused), Primary, 0, n, sec(50), ReasonNone},
			{sec(20), rep(0, refused), Primary, 0, n, sec(50), ReasonNone},
			{sec(20), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(21), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(22), can(2, refused), Failover, 0, n, sec(27), ReasonNone},
		}},
		{"a fixed retry interval: CanaryRetryMax equal to it", func(c *Config) { c.CanaryRetryMax = sec(5) }, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, refused), Failover, 0, n, sec(7), ReasonNone},
			{sec(7), tick(), Failover, 0, 1, noWake, ReasonNone},
			{sec(8), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(9), can(2, refused), Failover, 0, n, sec(14), ReasonNone},
		}},
		{"a regular success on primary in FAILOVER returns to PRIMARY", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), rep(0, ok), Primary, 0, n, noWake, ReasonPrimarySuccess},
			{sec(2), can(1, ok), Primary, 0, n, noWake, ReasonNone}, // late canary ignored
		}},
		{"seed race: canary success before the regular success costs one short BACKUP stint", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			// the network returns: the canary to dc2 answers first ...
			{sec(2), can(2, ok), Backup, 2, n, sec(12), ReasonCanarySuccess},
			// ... then the regular request sent to primary: stale, ignored
			{sec(2.1), rep(0, ok), Backup, 2, n, sec(12), ReasonNone},
			// the small first recovery delay ends the stint 10s later
			{sec(12), tick(), Recovery, 2, 0, noWake, ReasonRecoveryTimer},
			{sec(12.1), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"recovery failures grow the delay linearly up to the cap", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{0, can(1, ok), Backup, 1, n, sec(10), ReasonCanarySuccess},
			{sec(10), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(11), can(0, refused), Backup, 1, n, sec(31), ReasonRecoveryFailure}, // +20s
			{sec(31), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(32), can(0, srvError), Backup, 1, n, sec(62), ReasonRecoveryFailure}, // +30s; a 500 is no recovery
			{sec(62), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(63), can(0, refused), Backup, 1, n, sec(103), ReasonRecoveryFailure}, // +40s (cap)
			{sec(103), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(104), can(0, refused), Backup, 1, n, sec(144), ReasonRecoveryFailure}, // cap holds
			{sec(144), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(145), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
			// a new outage soon after: growth continues (5th entry: cap)
			{sec(200), rep(0, refused), Primary, 0, n, sec(230), ReasonNone},
			{sec(200), rep(0, refused), Primary, 0, n, sec(230), ReasonNone},
			{sec(200), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(201), can(1, ok), Backup, 1, n, sec(241), ReasonCanarySuccess},
		}},
		{"decay: long stable PRIMARY stints undo the growth", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{0, can(1, ok), Backup, 1, n, sec(10), ReasonCanarySuccess}, // entry 1: 10s
			{sec(10), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(10), can(0, refused), Backup, 1, n, sec(30), ReasonRecoveryFailure}, // entry 2: 20s
			{sec(30), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(30), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
			// 30 minutes on primary: less than one decay period, entry 3: 30s
			{sec(1830), rep(0, refused), Primary, 0, n, sec(1860), ReasonNone},
			{sec(1830), rep(0, refused), Primary, 0, n, sec(1860), ReasonNone},
			{sec(1830), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1830), can(1, ok), Backup, 1, n, sec(1860), ReasonCanarySuccess},
			{sec(1860), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(1860), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
			// two hours on primary remove two steps: entry counts as 2 (20s)
			{sec(1860 + 7200), rep(0, refused), Primary, 0, n, sec(1860 + 7230), ReasonNone},
			{sec(1860 + 7200), rep(0, refused), Primary, 0, n, sec(1860 + 7230), ReasonNone},
			{sec(1860 + 7200), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1860 + 7200), can(1, ok), Backup, 1, n, sec(1860 + 7220), ReasonCanarySuccess},
			{sec(1860 + 7220), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(1860 + 7220), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
			// a week later: fully decayed, back to the first delay (10s)
			{sec(1860 + 7220 + 7*86400), rep(0, refused), Primary, 0, n, sec(1860 + 7250 + 7*86400), ReasonNone},
			{sec(1860 + 7220 + 7*86400), rep(0, refused), Primary, 0, n, sec(1860 + 7250 + 7*86400), ReasonNone},
			{sec(1860 + 7220 + 7*86400), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1860 + 7220 + 7*86400), can(1, ok), Backup, 1, n, sec(1860 + 7230 + 7*86400), ReasonCanarySuccess},
		}},
		{"NetworkChanged resets the streak in PRIMARY", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(1), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(2), rep(0, refused), Primary, 0, n, sec(31), ReasonNone},
			{sec(3), netChanged(), Primary, 0, n, noWake, ReasonNone},
			{sec(4), rep(0, refused), Primary, 0, n, sec(34), ReasonNone},
			{sec(5), rep(0, refused), Primary, 0, n, sec(34), ReasonNone},
		}},
		{"NetworkChanged ends FAILOVER", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), netChanged(), Primary, 0, n, noWake, ReasonNetworkChanged},
			{sec(2), can(1, ok), Primary, 0, n, noWake, ReasonNone},
		}},
		{"NetworkChanged in BACKUP probes primary early", nil, []step{
			{0, start(1), Backup, 1, n, sec(10), ReasonRestored},
			{sec(2), netChanged(), Recovery, 1, 0, noWake, ReasonNetworkChanged},
			{sec(2), netChanged(), Recovery, 1, n, noWake, ReasonNone},
			{sec(3), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"device offline: every canary fails, stay on primary", func(c *Config) { c.DeviceOfflineCheck = true }, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, dnsFail), Failover, 0, 0, noWake, ReasonNone},
			{sec(3), can(0, timeout), Primary, 0, n, noWake, ReasonDeviceOffline},
			{sec(4), rep(0, refused), Primary, 0, n, sec(34), ReasonNone}, // a fresh streak
		}},
		{"device offline check: primary answers its canary", func(c *Config) { c.DeviceOfflineCheck = true }, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, refused), Failover, 0, 0, noWake, ReasonNone},
			{sec(3), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"confirm primary: the seed's race ends on PRIMARY, no BACKUP stint", confirm, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			// the network returns: dc2 answers first; primary is asked too
			{sec(2), can(2, ok), Failover, 0, 0, noWake, ReasonNone},
			{sec(2.1), can(0, ok), Primary, 0, n, noWake, ReasonPrimaryConfirmed},
			// the regular request arrives later: nothing more to do
			{sec(2.2), rep(0, ok), Primary, 0, n, noWake, ReasonNone},
		}},
		{"confirm primary: a real outage enters BACKUP one primary canary later", confirm, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, ok), Failover, 0, 0, noWake, ReasonNone},
			{sec(1.1), rep(0, refused), Failover, 0, n, noWake, ReasonNone}, // still probing
			// the recovery delay counts from the entry into BACKUP
			{sec(1.2), can(0, refused), Backup, 1, n, sec(11.2), ReasonCanarySuccess},
			{sec(11.2), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(12), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"confirm primary: a primary answering 503 is not trusted", confirm, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, ok), Failover, 0, 0, noWake, ReasonNone},
			{sec(3), can(0, srvError), Backup, 2, n, sec(13), ReasonCanarySuccess},
		}},
		{"confirm primary: a regular success while confirming wins", confirm, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, ok), Failover, 0, 0, noWake, ReasonNone},
			{sec(1.5), rep(0, ok), Primary, 0, n, noWake, ReasonPrimarySuccess},
			{sec(2), can(0, refused), Primary, 0, n, noWake, ReasonNone}, // late: ignored
			// a new outage: the held backup was forgotten, the walk restarts
			{sec(3), rep(0, refused), Primary, 0, n, sec(33), ReasonNone},
			{sec(3), rep(0, refused), Primary, 0, n, sec(33), ReasonNone},
			{sec(3), rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(4), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(5), can(2, ok), Failover, 0, 0, noWake, ReasonNone},
			{sec(6), can(0, timeout), Backup, 2, n, sec(16), ReasonCanarySuccess},
		}},
		{"confirm primary: NetworkChanged while confirming", confirm, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, ok), Failover, 0, 0, noWake, ReasonNone},
			{sec(2), netChanged(), Primary, 0, n, noWake, ReasonNetworkChanged},
			{sec(3), can(0, refused), Primary, 0, n, noWake, ReasonNone},
		}},
		{"confirm primary with the offline check: an offline round still ends on PRIMARY", func(c *Config) {
			c.ConfirmPrimary, c.DeviceOfflineCheck = true, true
		}, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{sec(1), can(1, refused), Failover, 0, 2, noWake, ReasonNone},
			{sec(2), can(2, dnsFail), Failover, 0, 0, noWake, ReasonNone},
			{sec(3), can(0, timeout), Primary, 0, n, noWake, ReasonDeviceOffline},
		}},
		{"confirm primary does not change RECOVERY", confirm, []step{
			{0, start(1), Backup, 1, n, sec(10), ReasonRestored},
			{sec(10), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(11), can(0, refused), Backup, 1, n, sec(31), ReasonRecoveryFailure},
			{sec(31), tick(), Recovery, 1, 0, noWake, ReasonRecoveryTimer},
			{sec(32), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"restored start in BACKUP still probes primary on its timer", nil, []step{
			{0, start(2), Backup, 2, n, sec(10), ReasonRestored},
			{sec(10), tick(), Recovery, 2, 0, noWake, ReasonRecoveryTimer},
			{sec(11), can(0, refused), Backup, 2, n, sec(31), ReasonRecoveryFailure},
			{sec(31), tick(), Recovery, 2, 0, noWake, ReasonRecoveryTimer},
			{sec(32), can(0, ok), Primary, 0, n, noWake, ReasonRecoverySuccess},
		}},
		{"an out-of-range restored index starts in PRIMARY", nil, []step{
			{0, start(3), Primary, 0, n, noWake, ReasonNone},
			{0, start(-1), Primary, 0, n, noWake, ReasonNone},
		}},
		{"a failing backup: probe primary, then the other backups", nil, []step{
			{0, start(1), Backup, 1, n, sec(10), ReasonRestored},
			{sec(1), rep(0, refused), Backup, 1, n, sec(10), ReasonNone}, // stale: sent to primary
			{sec(1), rep(1, refused), Backup, 1, n, sec(10), ReasonNone},
			{sec(2), rep(1, refused), Backup, 1, n, sec(10), ReasonNone},
			{sec(3), rep(1, refused), Recovery, 1, 0, noWake, ReasonFailures},
			{sec(4), can(0, refused), Recovery, 1, 2, noWake, ReasonNone},
			{sec(5), can(2, ok), Backup, 2, n, sec(25), ReasonCanarySuccess},
		}},
		{"a failing backup and nothing else answers: stay put", nil, []step{
			{0, start(1), Backup, 1, n, sec(10), ReasonRestored},
			{sec(1), rep(1, refused), Backup, 1, n, sec(10), ReasonNone},
			{sec(2), rep(1, refused), Backup, 1, n, sec(10), ReasonNone},
			{sec(3), rep(1, refused), Recovery, 1, 0, noWake, ReasonFailures},
			{sec(4), can(0, refused), Recovery, 1, 2, noWake, ReasonNone},
			{sec(5), can(2, refused), Backup, 1, n, sec(25), ReasonRecoveryFailure},
		}},
		{"a slow backup streak in BACKUP probes on the T timer", func(c *Config) { c.RecoveryTimeout = sec(60); c.RecoveryTimeoutMax = sec(60) }, []step{
			{0, start(1), Backup, 1, n, sec(60), ReasonRestored},
			{sec(1), rep(1, refused), Backup, 1, n, sec(31), ReasonNone},
			{sec(31), tick(), Recovery, 1, 0, noWake, ReasonStreakTimeout},
		}},
		{"canary results nobody waits for are ignored", nil, []step{
			{0, start(n), Primary, 0, n, noWake, ReasonNone},
			{0, can(1, ok), Primary, 0, n, noWake, ReasonNone},
			{0, can(0, ok), Primary, 0, n, noWake, ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Primary, 0, n, sec(30), ReasonNone},
			{0, rep(0, refused), Failover, 0, 1, noWake, ReasonFailures},
			{0, can(2, ok), Failover, 0, n, noWake, ReasonNone},
			{0, can(None, ok), Failover, 0, n, noWake, ReasonNone},
			{0, can(1, ok), Backup, 1, n, sec(10), ReasonCanarySuccess},
		}},
		{"Start resets a used policy", nil, []step{
			{0, start(1), Backup, 1, n, sec(10), ReasonRestored},
			{sec(1), rep(1, refused), Backup, 1, n, sec(10), ReasonNone},
			{sec(2), start(n), Primary, 0, n, noWake, ReasonNone},
			{sec(3), rep(0, refused), Primary, 0, n, sec(33), ReasonNone},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			p, err := NewUber(cfg)
			if err != nil {
				t.Fatal(err)
			}
			runSteps(t, p, tc.steps)
		})
	}
}
