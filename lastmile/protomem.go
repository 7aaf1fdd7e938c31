package lastmile

import (
	"fmt"
	"net/netip"
	"time"
)

// The protocol memory (broken protocols per network, HTTP/3 advertisements)
// is persisted in the DNS cache file (DNSConfig.CacheFile), so that a new
// launch does not pay again for a QUIC that is blocked on this network or
// absent on that origin. Networks are told apart by Options.NetworkName;
// without it every network is "" and the file holds the memory of the last
// one.

// protoEntry is one persisted broken-protocol mark.
type protoEntry struct {
	Network  string    `json:"network"`
	Addr     string    `json:"addr"`
	Protocol Protocol  `json:"protocol"`
	Failures int       `json:"failures"`
	Until    time.Time `json:"until"`
}

// altSvcEntry is one persisted HTTP/3 advertisement.
type altSvcEntry struct {
	Addr  string    `json:"addr"`
	Until time.Time `json:"until"`
}

// maxProtoEntries bounds each persisted list.
const maxProtoEntries = 4096

func validExtras(ps []protoEntry, as []altSvcEntry) error {
	if len(ps) > maxProtoEntries || len(as) > maxProtoEntries {
		return fmt.Errorf("%w: more than %d protocol entries", ErrCacheFile, maxProtoEntries)
	}
	for i, p := range ps {
		if _, err := netip.ParseAddrPort(p.Addr); err != nil {
			return fmt.Errorf("%w: protocols[%d].addr %q", ErrCacheFile, i, p.Addr)
		}
		if p.Protocol != ProtocolH3 && p.Protocol != ProtocolTCP {
			return fmt.Errorf("%w: protocols[%d].protocol %q", ErrCacheFile, i, p.Protocol)
		}
		if p.Failures < 1 || p.Failures > 64 || p.Until.IsZero() || len(p.Network) > 256 {
			return fmt.Errorf("%w: protocols[%d]: bad failures, until or network", ErrCacheFile, i)
		}
	}
	for i, a := range as {
		if _, err := netip.ParseAddrPort(a.Addr); err != nil || a.Until.IsZero() {
			return fmt.Errorf("%w: alt_svc[%d]: bad addr or until", ErrCacheFile, i)
		}
	}
	return nil
}

// export returns the marks of network still in force at now, labelled name.
func (b *brokenMemory) export(network uint64, name string, now time.Time) []protoEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []protoEntry
	for k, st := range b.m {
		if k.network == network && now.Before(st.until) {
			out = append(out, protoEntry{Network: name, Addr: k.addr, Protocol: k.proto, Failures: st.failures, Until: st.until})
		}
	}
	return out
}

// restore loads the persisted marks labelled name into network.
func (b *brokenMemory) restore(network uint64, name string, es []protoEntry, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range es {
		if e.Network == name && now.Before(e.Until) {
			b.m[brokenKey{network, e.Addr, e.Protocol}] = brokenState{failures: e.Failures, until: e.Until}
		}
	}
}

// loadProtocolMemory restores what the cache file held for the current
// network and hooks the live memory into the file's writes.
func (t *Transport) loadProtocolMemory() {
	now := t.clk.Now()
	x := t.res.cache.loaded
	t.netName = t.networkName()
	t.racer.alt.restore(x.altSvc, now)
	t.racer.broken.restore(t.network.Load(), t.netName, x.protocols, now)
	for _, e := range x.protocols {
		if e.Network != t.netName && e.Network != "" && now.Before(e.Until) {
			t.otherNets = append(t.otherNets, e)
		}
	}
	t.res.cache.mu.Lock()
	t.res.cache.extras = t.protocolMemory
	t.res.cache.mu.Unlock()
	t.racer.broken.onChange = t.res.cache.touch
	t.racer.alt.onChange = t.res.cache.touch
}

// protocolMemory is what the cache file's writer persists.
func (t *Transport) protocolMemory() fileExtras {
	now := t.clk.Now()
	t.mu.Lock()
	name, others := t.netName, t.otherNets
	t.mu.Unlock()
	ps := t.racer.broken.export(t.network.Load(), name, now)
	for _, e := range others {
		if now.Before(e.Until) && len(ps) < maxProtoEntries {
			ps = append(ps, e)
		}
	}
	as := t.racer.alt.export(now)
	return fileExtras{protocols: ps, altSvc: as[:min(len(as), maxProtoEntries)]}
}

// switchNetwork moves the protocol memory to the network now named by
// Options.NetworkName: the old network's marks are kept for a return to it
// (when it had a name), the new network's persisted marks are restored.
// Called by NetworkChanged with the new epoch already set.
func (t *Transport) switchNetwork(oldEpoch, newEpoch uint64) {
	now := t.clk.Now()
	name := t.networkName()
	t.mu.Lock()
	old := t.netName
	saved := t.racer.broken.export(oldEpoch, old, now)
	var others []protoEntry
	for _, e := range t.otherNets {
		if e.Network != old && e.Network != name && now.Before(e.Until) {
			others = append(others, e)
		}
	}
	var restore []protoEntry
	for _, e := range t.otherNets {
		if e.Network == name && name != "" {
			restore = append(restore, e)
		}
	}
	if old != "" {
		others = append(others, saved...)
	}
	t.netName, t.otherNets = name, others
	t.mu.Unlock()
	t.racer.broken.restore(newEpoch, name, restore, now)
	t.racer.broken.forget(newEpoch)
	t.res.cache.touch()
}

func (t *Transport) networkName() string {
	if t.opts.NetworkName == nil {
		return ""
	}
	return t.opts.NetworkName()
}
