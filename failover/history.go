package failover

import (
	"slices"
	"time"
)

// NetworkFailure records that the primary failed on a network: the seed's
// "prediction from history". Network is what the app reports for the
// network it is on (a carrier and network type, a Wi-Fi SSID...).
type NetworkFailure struct {
	Network string    `json:"network"`
	At      time.Time `json:"at"`
}

// NetworkAware is implemented by policies that can be told which network
// the device is on and that keep a per-network memory of primary failures
// (the veer policy; Uber answers SetNetwork with its NetworkChanged rule and
// remembers nothing). The shell persists Memory with the backup domain and
// hands it back with Remember before the next Start.
type NetworkAware interface {
	Policy
	// SetNetwork tells the policy the device is on network now. A change
	// from a known network is a network change (see NetworkChanged). If
	// the primary failed on network within HistoryTTL, PRIMARY and
	// FAILOVER start FAILOVER at once (reason history) and BACKUP stays on
	// its backup instead of probing the primary early.
	SetNetwork(now time.Time, network string) Action
	// Memory returns the remembered failures, least recent first. The
	// slice belongs to the policy: copy it to keep it.
	Memory() []NetworkFailure
	// MemoryGen changes whenever Memory does.
	MemoryGen() uint64
	// Remember replaces the memory by a copy of h, keeping the
	// HistorySize most recent entries; call it before Start.
	Remember(h []NetworkFailure)
}

var _ NetworkAware = (*Uber)(nil)

// SetNetwork implements NetworkAware.
func (u *Uber) SetNetwork(now time.Time, network string) Action {
	if network == u.network {
		return u.idle()
	}
	prev := u.network
	u.network = network
	if u.suspect(now, network) {
		switch u.state {
		case Primary, Failover:
			return u.toFailover(now, ReasonHistory)
		case Backup:
			u.streak = 0
			return u.idle() // the primary failed here recently: no early probe
		}
	}
	if prev != "" {
		return u.NetworkChanged(now)
	}
	return u.idle()
}

// Memory implements NetworkAware.
func (u *Uber) Memory() []NetworkFailure { return u.hist }

// MemoryGen implements NetworkAware.
func (u *Uber) MemoryGen() uint64 { return u.histGen }

// Remember implements NetworkAware.
func (u *Uber) Remember(h []NetworkFailure) {
	if len(h) > u.histMax {
		h = h[len(h)-u.histMax:]
	}
	u.hist = append(u.hist[:0], h...)
}

// suspect reports whether the primary failed on network within HistoryTTL.
func (u *Uber) suspect(now time.Time, network string) bool {
	if !u.useHist || network == "" {
		return false
	}
	for _, f := range u.hist {
		if f.Network == network {
			return now.Sub(f.At) < u.histTTL
		}
	}
	return false
}

// record notes that the primary failed on the current network at now: the
// entry moves to the end (most recent); expired entries and, beyond
// HistorySize, the least recent go.
func (u *Uber) record(now time.Time) {
	if !u.useHist || u.network == "" {
		return
	}
	u.hist = slices.DeleteFunc(u.hist, func(f NetworkFailure) bool {
		return f.Network == u.network || now.Sub(f.At) >= u.histTTL
	})
	if len(u.hist) >= u.histMax {
		u.hist = slices.Delete(u.hist, 0, len(u.hist)-u.histMax+1)
	}
	u.hist = append(u.hist, NetworkFailure{Network: u.network, At: now})
	u.histGen++
}

// forget drops the current network's entry: the primary answered there.
func (u *Uber) forget() {
	if !u.useHist || u.network == "" {
		return
	}
	n := len(u.hist)
	u.hist = slices.DeleteFunc(u.hist, func(f NetworkFailure) bool { return f.Network == u.network })
	if len(u.hist) != n {
		u.histGen++
	}
}
