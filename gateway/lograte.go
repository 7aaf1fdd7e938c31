package gateway

import (
	"sync"
	"time"
)

// MaxRefusalLogsPerSecond bounds the log lines of refused requests (bad
// framing): a storm of bad requests is counted in full by
// veer_gateway_guard_rejected_total but does not become a storm of log
// lines. The first line after a suppressed stretch says how many were
// left out.
const MaxRefusalLogsPerSecond = 10

// logRate allows at most max lines per one-second window.
type logRate struct {
	max int

	mu         sync.Mutex
	window     int64 // unix second of the current window
	n          int   // lines allowed in it
	suppressed int   // lines left out since the last allowed one
}

// allow reports whether a line may be written at now and, if so, how many
// were left out before it.
func (l *logRate) allow(now time.Time) (ok bool, suppressed int) {
	sec := now.Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	if sec != l.window {
		l.window, l.n = sec, 0
	}
	if l.n >= l.max {
		l.suppressed++
		return false, 0
	}
	l.n++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}
