package shed

import (
	"math/bits"
	"sync/atomic"

	"github.com/veerhq/veer/tier"
)

// tierMix records which tiers reached a stage in its current and previous
// interval, so that a request of a tier that is never shed yields (see
// acquire) only where the yield can change something. Every request of an
// endpoint of one tier (a gateway's default tier, an internal service called
// by one caller class) would bring in, by yielding, only requests of that same
// tier: they queue FIFO (adaptive LIFO and CoDel drops apply to sheddable
// tiers), so no order changes and nothing is shed, and the yield is CPU spent
// for nothing (docs/shed.md, "fourth pass: shedyield").
//
// One word, no lock: bits 0-4 are the current interval's tiers (bit t for
// tier t), bits 5-9 the previous interval's, the rest the interval (the
// stage's nextTick, in units of 2^20 ns, about 1 ms; intervals last 100 ms).
// A request whose tier is already noted does one atomic load.
type tierMix struct{ w atomic.Uint64 }

const (
	mixBits  = 5
	mixMask  = 1<<mixBits - 1
	mixShift = 2 * mixBits
)

// note records a request of tier t in the interval that ends at next (unix
// ns); a new interval moves the current tiers to the previous.
func (m *tierMix) note(t tier.Tier, next int64) {
	if !t.Valid() {
		return
	}
	id := uint64(next) >> 20 // below 2^44 until the year 2527: fits above the masks
	bit := uint64(1) << uint(t)
	for {
		w := m.w.Load()
		var nw uint64
		if w>>mixShift == id {
			if w&bit != 0 {
				return
			}
			nw = w | bit
		} else {
			nw = id<<mixShift | (w&mixMask)<<mixBits | bit
		}
		if m.w.CompareAndSwap(w, nw) {
			return
		}
	}
}

// mixed reports whether more than one tier reached the stage in the current
// and previous intervals.
func (m *tierMix) mixed() bool {
	w := m.w.Load()
	return bits.OnesCount64((w|w>>mixBits)&mixMask) > 1
}
