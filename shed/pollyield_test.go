package shed

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestPollYieldRunsNetworkWokenFirst: a goroutine whose descriptor became
// readable while the processor was busy has run by the time pollYield
// returns. runtime.Gosched fails this: with the run queue non-empty, the
// scheduler does not poll and the yielding goroutine is picked again at once.
// The reader reads a pipe, which the runtime polls like a connection, because
// a pipe is readable as soon as the write returns (loopback TCP may deliver
// a moment later, which would race with the poll).
func TestPollYieldRunsNetworkWokenFirst(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	server, client, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	defer client.Close()

	const rounds = 20
	ranFirst := 0
	for range rounds {
		var read atomic.Bool
		reading := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			// On one processor this goroutine runs on from the send
			// until it parks in Read: the test goroutine writes only
			// once it is parked.
			reading <- struct{}{}
			var b [1]byte
			if _, err := server.Read(b[:]); err == nil {
				read.Store(true)
			}
		}()
		<-reading
		if _, err := client.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		pollYield()
		if read.Load() {
			ranFirst++
		}
		<-done
	}
	// A round may miss when the runtime happens to be mid-way through
	// something of its own (seen: the first round after a synctest
	// bubble); runtime.Gosched misses every round.
	if ranFirst < rounds-2 {
		t.Fatalf("the woken reader ran before pollYield returned in %d of %d rounds, want at least %d", ranFirst, rounds, rounds-2)
	}
}

// TestPollYieldLeavesNothingBehind: nothing started by pollYield outlives
// it, so a testing/synctest bubble that yields can still advance its clock
// and end (a goroutine parked on the network would block both).
func TestPollYieldLeavesNothingBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for range 3 {
			pollYield()
		}
		start := time.Now()
		time.Sleep(time.Second)
		if d := time.Since(start); d != time.Second {
			t.Fatalf("slept %v of virtual time, want 1s", d)
		}
	})
}

// BenchmarkPollYield is the cost of one yield on an otherwise idle
// processor (the poll finds the pipe at once): what a request pays for it
// while the run queue is busy.
func BenchmarkPollYield(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		pollYield()
	}
}

// TestPollYieldBoundsPollers: however many goroutines yield at once, at
// most maxPollers wait for a poll (each holds a pipe), and every one of them
// returns.
func TestPollYieldBoundsPollers(t *testing.T) {
	var wg sync.WaitGroup
	var peak atomic.Int32
	for range 10 * maxPollers {
		wg.Go(func() {
			for range 20 {
				pollYield()
				if n := pollers.Load(); n > peak.Load() {
					peak.Store(n)
				}
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > maxPollers {
		t.Fatalf("%d goroutines waited for a poll at once, want at most %d", p, maxPollers)
	}
	if n := pollers.Load(); n != 0 {
		t.Fatalf("%d pollers left after every yield returned", n)
	}
}
