package failover

import "time"

// NetworkChanged tells the policy that the device changed network (Wi-Fi to
// cellular, say): failure streaks restart, FAILOVER returns to PRIMARY and
// BACKUP probes the primary at once. When the wrapped round tripper has a
// NetworkChanged method too (lastmile.Transport does), it is called as well.
func (t *Transport) NetworkChanged() {
	// The wrapped round tripper may keep per-network state of its own (the
	// last-mile chain's working routes, its broken-protocol memory): it
	// forgets the old network first, so that the probe the policy starts
	// below does not go out on the old network's routes.
	if n, ok := t.next.(interface{ NetworkChanged() }); ok {
		n.NetworkChanged()
	}
	t.step(func(now time.Time) Action { return t.policy.NetworkChanged(now) })
}

// SetNetwork tells the Transport which network the device is on, as the app
// names it (a carrier and network type, a Wi-Fi SSID: "cell/C4/lte",
// "wifi/home"). Call it at start and at every change. A change from a known
// network is a network change (see NetworkChanged). The default policy
// remembers, per network, that the primary failed there recently and
// persists that memory with the backup domain (Config.HistoryTTL,
// HistorySize): on coming back to such a network it starts FAILOVER at
// once instead of spending FailureThreshold failed requests.
func (t *Transport) SetNetwork(network string) {
	t.mu.Lock()
	prev := t.network
	t.network = network
	t.mu.Unlock()
	if prev == network {
		return
	}
	if prev != "" {
		if n, ok := t.next.(interface{ NetworkChanged() }); ok {
			n.NetworkChanged()
		}
	}
	t.step(func(now time.Time) Action {
		if na, ok := t.policy.(NetworkAware); ok {
			return na.SetNetwork(now, network)
		}
		if prev != "" {
			return t.policy.NetworkChanged(now)
		}
		return keep
	})
}
