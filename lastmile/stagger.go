package lastmile

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/veerhq/veer/clock"
)

// staggered runs n attempts happy-eyeballs style (RFC 8305 section 5):
// attempt 0 at once, attempt i+1 as soon as attempt i failed or delay(i)
// passed without a result (a negative delay: only after the failure, once
// nothing else runs). The first result wins and the attempts still running
// are canceled (a canceled attempt marks nothing broken) and waited for.
// done is called, on this goroutine, with each attempt that finished before
// the winner; the returned error is the last failure that was not a skip
// (isSkip), or a skip. Route steps and a step's nodes run through it.
func staggered[T any](ctx context.Context, clk clock.Clock, n int, delay func(i int) time.Duration,
	run func(ctx context.Context, i int) (T, error), done func(i int, err error)) (T, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel() // the losers end promptly: every attempt honours ctx
		wg.Wait()
	}()
	type result struct {
		i   int
		r   T
		err error
	}
	results := make(chan result, n)
	next, pending := 0, 0
	var timer <-chan time.Time
	var tm interface{ Stop() bool }
	defer func() {
		if tm != nil {
			tm.Stop()
		}
	}()
	start := func() {
		if tm != nil {
			tm.Stop()
			tm, timer = nil, nil
		}
		if next >= n {
			return
		}
		i := next
		next++
		pending++
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := run(ctx, i)
			results <- result{i, r, err}
		}()
		if d := delay(i); d >= 0 && next < n {
			if d == 0 {
				timer = closedTimeChan
				return
			}
			ct := clk.NewTimer(d)
			tm, timer = ct, ct.C()
		}
	}
	start()
	var last error
	for pending > 0 {
		select {
		case <-timer:
			timer = nil
			start()
		case res := <-results:
			pending--
			done(res.i, res.err)
			if res.err == nil {
				return res.r, nil
			}
			if last == nil || !isSkip(res.err) {
				last = res.err
			}
			if ctx.Err() == nil && (delay(res.i) >= 0 || pending == 0) {
				// A failure starts the next attempt at once (without a
				// stagger: once nothing else runs).
				start()
			}
		}
	}
	if last == nil {
		last = errSkip
	}
	var zero T
	return zero, last
}

var closedTimeChan = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

func isSkip(err error) bool { return errors.Is(err, errSkip) || errors.Is(err, ErrSkippedBroken) }
