package shed

import (
	"testing"
	"time"

	"github.com/veerhq/veer/shed/internal/runq"
	"github.com/veerhq/veer/tier"
)

// oneProcQueue is a fixedRunQueue on one processor (the start turn's
// GOMAXPROCS, turnProcs).
type oneProcQueue struct{ *fixedRunQueue }

func (oneProcQueue) procs() int { return 1 }

// TestStartTurn is the step table of when an admitted request takes the
// start turn (runq.Turns.Wait: two yields when nobody else starts, its
// own table is runq's TestTurnWait), yields once, or not at all, given the
// run queue's state, its tier, its endpoint's contention and when a
// never-shed request was last admitted under a busy run queue.
func TestStartTurn(t *testing.T) {
	// neverShed: when a never-shed request was last noted (Turns.Wanted),
	// before the request of the row; 0: never. The turn remembers one for
	// a second.
	const long = 2 * time.Second
	tests := []struct {
		name            string
		busy, saturated bool
		tier            tier.Tier
		contended       int
		neverShed       time.Duration
		want            int
	}{
		{"saturated, a never-shed request lately: the turn", true, true, tier.SheddablePlus, 0, time.Millisecond, 2},
		{"saturated, sheddable, a never-shed request lately: the turn", true, true, tier.Sheddable, 0, time.Millisecond, 2},
		{"saturated, no never-shed request ever: no turn", true, true, tier.Sheddable, 0, 0, 1},
		{"saturated, the last never-shed request long ago: no turn", true, true, tier.Sheddable, 0, long, 1},
		{"busy, not saturated (a dependency): no turn", true, false, tier.SheddablePlus, 0, time.Millisecond, 1},
		{"saturated, critical on a contended endpoint: no turn", true, true, tier.Critical, 1, time.Millisecond, 1},
		{"not busy: no yield", false, false, tier.Sheddable, 0, time.Millisecond, 0},
	}
	for _, tt := range tests {
		s, _ := newShedder(t, Config{})
		s.turns = &runq.Turns{}
		if tt.neverShed > 0 {
			s.turns.NoteNeverShed(time.Now().Add(-tt.neverShed))
		}
		rq := oneProcQueue{&fixedRunQueue{}}
		rq.isBusy.Store(tt.busy)
		rq.isSaturated.Store(tt.saturated)
		s.rq = rq
		yields := 0
		s.yield = func() { yields++ }
		acquireOnce(t, s, tt.contended > 0, tt.tier)
		if yields != tt.want {
			t.Errorf("%s: %d yields, want %d", tt.name, yields, tt.want)
		}
	}
}
