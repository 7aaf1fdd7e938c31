package release

import (
	"hash/fnv"
	"slices"
)

// Version is which side of a release serves a request.
type Version uint8

// The versions.
const (
	A Version = iota // the cluster serving the route before the release (Plan.From)
	B                // the new version (Plan.To)
)

func (v Version) String() string {
	if v == B {
		return "b"
	}
	return "a"
}

// Slots is the size of the ring hash: a ring's share is a range of slots,
// so 0.01 % steps.
const Slots = 10000

// Slot is a tenant's place on the ring: stable across steps, gateways and
// restarts (FNV-1a of the route and the tenant key), so that widening a ring
// only adds tenants to B and a tenant never flaps between A and B within a
// step. The route is mixed in so that the same tenants are not always the
// first on every route.
func Slot(route, tenant string) int {
	h := fnv.New64a()
	h.Write([]byte(route))
	h.Write([]byte{0})
	h.Write([]byte(tenant))
	return int(h.Sum64() % Slots)
}

// Assign says which version serves tenant at step (0-based, as in
// State.Step) of p; a step past the last is the last (done: everyone on B);
// a negative step (aborted or not started) is A.
func Assign(p Plan, step int, route, tenant string) Version {
	if step < 0 {
		return A
	}
	p = p.withDefaults()
	canary := len(p.CanaryTenants) > 0
	if canary && slices.Contains(p.CanaryTenants, tenant) {
		return B
	}
	ring := step
	if canary {
		ring-- // step 0 is the canary tenants only
	}
	if ring < 0 {
		return A
	}
	ring = min(ring, len(p.Rings)-1)
	if Slot(route, tenant) < int(p.Rings[ring]*Slots/100) {
		return B
	}
	return A
}
