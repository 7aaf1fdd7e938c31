package shed

import (
	"testing"
	"time"

	"github.com/veerhq/veer/tier"
)

// oneProcQueue is a fixedRunQueue on one processor (the start turn's
// GOMAXPROCS, turn.go).
type oneProcQueue struct{ *fixedRunQueue }

func (oneProcQueue) procs() int { return 1 }

// TestStartTurn is the start turn's step table: how many times one
// admitted request yields (a round of the turn is two yields: a poll, and
// one for what the poll woke to run), given the run queue's state, its tier, and what
// the other requests do while it yields (another sheddable handler starts;
// an older request in line starts).
func TestStartTurn(t *testing.T) {
	const (
		none        = iota
		startOnce   // another sheddable handler starts during the first yield
		startSecond // ... during the second yield (the poll's goroutines' turn)
		startEach   // ... during every yield
		olderLine   // an older request is in line; it starts during the third yield
	)
	// neverShed: when a never-shed request was last admitted under a busy
	// run queue (turnWanted), before the request of the row; 0: never.
	const long = 2 * turnMemory
	tests := []struct {
		name              string
		busy, saturated   bool
		tier              tier.Tier
		contended, others int
		neverShed         time.Duration
		want              int
	}{
		{"saturated, nobody else starts: one round", true, true, tier.SheddablePlus, 0, none, time.Millisecond, 2},
		{"saturated, another starts during the round's first yield: another round", true, true, tier.SheddablePlus, 0, startOnce, time.Millisecond, 4},
		{"saturated, another starts during the round's second yield: another round", true, true, tier.SheddablePlus, 0, startSecond, time.Millisecond, 4},
		{"saturated, others start during every yield: bounded", true, true, tier.Sheddable, 0, startEach, time.Millisecond, 2 * (turnYields + 1)},
		{"saturated, an older request in line: waits for it, then for a round after it", true, true, tier.Sheddable, 0, olderLine, time.Millisecond, 6},
		{"saturated, no never-shed request ever: no turn", true, true, tier.Sheddable, 0, startEach, 0, 1},
		{"saturated, the last never-shed request long ago: no turn", true, true, tier.Sheddable, 0, startEach, long, 1},
		{"busy, not saturated (a dependency): no turn", true, false, tier.SheddablePlus, 0, startEach, time.Millisecond, 1},
		{"saturated, critical on a contended endpoint: no turn", true, true, tier.Critical, 1, startEach, time.Millisecond, 1},
		{"not busy: no yield", false, false, tier.Sheddable, 0, startEach, time.Millisecond, 0},
	}
	for _, tt := range tests {
		neverShedAt.Store(0)
		if tt.neverShed > 0 {
			noteNeverShed(time.Now().Add(-tt.neverShed))
		}
		s, _ := newShedder(t, Config{})
		rq := oneProcQueue{&fixedRunQueue{}}
		rq.isBusy.Store(tt.busy)
		rq.isSaturated.Store(tt.saturated)
		s.rq = rq
		var older uint64
		if tt.others == olderLine {
			older = turnTickets.Add(1) - 1
		}
		yields := 0
		s.yield = func() {
			yields++
			switch {
			case tt.others == startEach, tt.others == startOnce && yields == 1, tt.others == startSecond && yields == 2:
				turnStarts.Add(1)
			case tt.others == olderLine && yields == 3:
				turnStarts.Add(1)
				turnServing.Store(older + 1)
			}
		}
		acquireOnce(t, s, tt.contended > 0, tt.tier)
		if yields != tt.want {
			t.Errorf("%s: %d yields, want %d", tt.name, yields, tt.want)
		}
	}
}
