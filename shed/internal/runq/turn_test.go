package runq

import (
	"testing"
	"time"
)

// TestTurnWait is the start turn's step table on one processor: how many
// times one request yields (a round of the turn is two yields: a poll, and
// one for what the poll woke to run), given what the other requests do
// while it yields (another sheddable handler starts; an older request in
// line starts).
func TestTurnWait(t *testing.T) {
	const (
		none        = iota
		startOnce   // another sheddable handler starts during the first yield
		startSecond // ... during the second yield (the poll's goroutines' turn)
		startEach   // ... during every yield
		olderLine   // an older request is in line; it starts during the third yield
	)
	tests := []struct {
		name   string
		others int
		want   int
	}{
		{"nobody else starts: one round", none, 2},
		{"another starts during the round's first yield: another round", startOnce, 4},
		{"another starts during the round's second yield: another round", startSecond, 4},
		{"others start during every yield: bounded", startEach, 2 * (turnYields + 1)},
		{"an older request in line: waits for it, then for a round after it", olderLine, 6},
	}
	for _, tt := range tests {
		var l Turns
		var older uint64
		if tt.others == olderLine {
			older = l.tickets.Add(1) - 1
		}
		yields := 0
		yield := func() {
			yields++
			switch {
			case tt.others == startEach, tt.others == startOnce && yields == 1, tt.others == startSecond && yields == 2:
				l.starts.Add(1)
			case tt.others == olderLine && yields == 3:
				l.starts.Add(1)
				l.serving.Store(older + 1)
			}
		}
		l.Wait(1, yield, nil)
		if yields != tt.want {
			t.Errorf("%s: %d yields, want %d", tt.name, yields, tt.want)
		}
		if got := l.starts.Load(); got == 0 {
			t.Errorf("%s: the request's own start was not counted", tt.name)
		}
	}
}

// TestTurnWanted: the turn is wanted within turnMemory of a never-shed
// request noted under a busy run queue, not before one, not long after, and
// not for a time before the note (a clock from another world).
func TestTurnWanted(t *testing.T) {
	now := time.Unix(1000, 0)
	tests := []struct {
		name string
		note time.Duration // when the never-shed request was noted, before now; 0: never
		want bool
	}{
		{"never noted", 0, false},
		{"noted a millisecond ago", time.Millisecond, true},
		{"noted just within turnMemory", turnMemory - time.Millisecond, true},
		{"noted turnMemory ago", turnMemory, false},
		{"noted in the future", -time.Second, false},
	}
	for _, tt := range tests {
		var l Turns
		if tt.note != 0 {
			l.NoteNeverShed(now.Add(-tt.note))
		}
		if got := l.Wanted(now); got != tt.want {
			t.Errorf("%s: Wanted %v, want %v", tt.name, got, tt.want)
		}
	}
}
