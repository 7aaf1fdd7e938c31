package dnsserver

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"time"
)

// rrlDecision is what response rate limiting does with one response.
type rrlDecision uint8

const (
	rrlAllow rrlDecision = iota // answer normally
	rrlDrop                     // send nothing
	rrlSlip                     // send an empty answer with TC set
)

const rrlShards = 16

// rrl is response rate limiting: a token bucket per client prefix. Its core
// takes now, so tests drive it with exact times.
type rrl struct {
	rate     float64 // tokens per second
	burst    float64
	slip     int
	v4, v6   int
	perShard int
	seed     maphash.Seed
	shards   [rrlShards]rrlShard
}

type rrlShard struct {
	mu sync.Mutex
	m  map[netip.Prefix]*bucket
}

type bucket struct {
	tokens  float64
	last    time.Time
	limited int // limited responses since the bucket last had a token
}

func newRRL(c RRLConfig) *rrl {
	if c.ResponsesPerSecond <= 0 {
		return nil
	}
	r := &rrl{
		rate:     c.ResponsesPerSecond,
		burst:    float64(c.Burst),
		slip:     c.Slip,
		v4:       c.IPv4Prefix,
		v6:       c.IPv6Prefix,
		perShard: max(1, c.MaxClients/rrlShards),
		seed:     maphash.MakeSeed(),
	}
	for i := range r.shards {
		r.shards[i].m = map[netip.Prefix]*bucket{}
	}
	return r
}

// decide spends one token of a's prefix at now.
func (r *rrl) decide(a netip.Addr, now time.Time) rrlDecision {
	a = a.Unmap()
	bits := r.v6
	if a.Is4() {
		bits = r.v4
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return rrlAllow
	}
	b16 := p.Addr().As16()
	sh := &r.shards[maphash.Bytes(r.seed, b16[:])%rrlShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.m[p]
	if b == nil {
		if len(sh.m) >= r.perShard {
			r.sweep(sh, now)
		}
		b = &bucket{tokens: r.burst, last: now}
		sh.m[p] = b
	}
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(r.burst, b.tokens+el.Seconds()*r.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		b.limited = 0
		return rrlAllow
	}
	b.limited++
	if b.limited%r.slip == 0 {
		return rrlSlip
	}
	return rrlDrop
}

// sweep forgets the prefixes whose bucket has refilled (they behave as new
// ones); if none has, it forgets all of the shard's, so memory stays bounded
// under a flood of spoofed sources.
func (r *rrl) sweep(sh *rrlShard, now time.Time) {
	full := time.Duration(r.burst / r.rate * float64(time.Second))
	for p, b := range sh.m {
		if now.Sub(b.last) >= full {
			delete(sh.m, p)
		}
	}
	if len(sh.m) >= r.perShard {
		clear(sh.m)
	}
}
