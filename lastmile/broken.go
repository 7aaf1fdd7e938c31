package lastmile

import (
	"sync"
	"time"
)

// brokenMemory remembers protocols that failed on a node: after the n-th
// consecutive failure (n from 0) the protocol is skipped for base × 2ⁿ,
// capped at max. Entries are per network: a key carries the network epoch,
// which NetworkChanged advances, so a protocol blocked on one network is
// tried again on the next. It is the pure core of the racer: every method
// takes now.
type brokenMemory struct {
	base, max time.Duration

	mu sync.Mutex
	m  map[brokenKey]brokenState

	onChange func() // called after a mark is set or cleared (persistence)
}

type brokenKey struct {
	network uint64
	addr    string
	proto   Protocol
}

type brokenState struct {
	failures int
	until    time.Time
}

func newBrokenMemory(base, max time.Duration) *brokenMemory {
	return &brokenMemory{base: base, max: max, m: map[brokenKey]brokenState{}}
}

// broken reports whether step is currently marked broken on addr.
func (b *brokenMemory) broken(network uint64, addr string, s Protocol, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.m[brokenKey{network, addr, s}]
	return ok && now.Before(st.until)
}

// fail records a failure and returns how long the protocol stays broken.
func (b *brokenMemory) fail(network uint64, addr string, s Protocol, now time.Time) time.Duration {
	b.mu.Lock()
	k := brokenKey{network, addr, s}
	st := b.m[k]
	d := b.base
	for i := 0; i < st.failures && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	st.failures++
	st.until = now.Add(d)
	b.m[k] = st
	b.mu.Unlock()
	if b.onChange != nil {
		b.onChange()
	}
	return d
}

// succeed forgets the failures of step on addr.
func (b *brokenMemory) succeed(network uint64, addr string, s Protocol) {
	b.mu.Lock()
	k := brokenKey{network, addr, s}
	_, had := b.m[k]
	delete(b.m, k)
	b.mu.Unlock()
	if had && b.onChange != nil {
		b.onChange()
	}
}

// forget drops every entry of networks other than keep.
func (b *brokenMemory) forget(keep uint64) {
	b.mu.Lock()
	for k := range b.m {
		if k.network != keep {
			delete(b.m, k)
		}
	}
	b.mu.Unlock()
}
