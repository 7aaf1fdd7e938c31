// Package tier names how critical a request is, carries that through
// contexts, and encodes it on the wire, so that a shedder anywhere downstream
// drops the least important work first (Uber QALM, seed 001).
//
// There are four tiers, from most to least important:
//
//	critical_plus  core infrastructure   never shed by default
//	critical       core flow (a trip)    never shed by default
//	sheddable_plus user-facing features  shed under overload
//	sheddable      internal/test traffic shed first
//
// Wire form: the HTTP headers Veer-Criticality and Rpc-Caller, and the gRPC
// metadata keys veer-criticality and rpc-caller. Decoding is strict: an
// unknown tier name is reported, never guessed.
//
// Contract: Tier values compare with < and >: a larger Tier is more critical.
// The zero value Unset means "not stated"; policies supply their default.
package tier

import (
	"errors"
	"fmt"
)

// Tier is a criticality level. Larger is more critical.
type Tier uint8

// The tiers. Unset is the zero value: the request did not say.
const (
	Unset Tier = iota
	Sheddable
	SheddablePlus
	Critical
	CriticalPlus
)

// All lists the tiers from least to most critical (Unset excluded).
var All = [...]Tier{Sheddable, SheddablePlus, Critical, CriticalPlus}

var names = [...]string{
	Unset:         "unset",
	Sheddable:     "sheddable",
	SheddablePlus: "sheddable_plus",
	Critical:      "critical",
	CriticalPlus:  "critical_plus",
}

// ErrUnknown is returned by Parse for a name that is not a tier.
var ErrUnknown = errors.New("tier: unknown criticality")

// String returns the wire name, e.g. "sheddable_plus".
func (t Tier) String() string {
	if int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// Valid reports whether t is one of the four tiers.
func (t Tier) Valid() bool { return t >= Sheddable && t <= CriticalPlus }

// Parse returns the tier named s. It accepts the wire names and, for
// operators coming from QALM, the names of its four classes
// (core_infrastructure, core_flow, user_facing, internal). Matching is exact
// and case-sensitive except that '-' may stand for '_'.
func Parse(s string) (Tier, error) {
	if len(s) > 32 {
		return Unset, ErrUnknown
	}
	b := []byte(s)
	for i, c := range b {
		if c == '-' {
			b[i] = '_'
		}
	}
	switch string(b) {
	case "critical_plus", "core_infrastructure":
		return CriticalPlus, nil
	case "critical", "core_flow":
		return Critical, nil
	case "sheddable_plus", "user_facing":
		return SheddablePlus, nil
	case "sheddable", "internal":
		return Sheddable, nil
	}
	return Unset, fmt.Errorf("%w: %q", ErrUnknown, s)
}

// MarshalText implements encoding.TextMarshaler (YAML and JSON configs).
// Unset marshals as the empty string, which UnmarshalText reads back as
// Unset, so a config with a field left at its default survives a round trip.
func (t Tier) MarshalText() ([]byte, error) {
	if t == Unset {
		return []byte{}, nil
	}
	if !t.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknown, uint8(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler. The empty string is
// Unset (the field's default); any other name must be a tier (Parse).
func (t *Tier) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*t = Unset
		return nil
	}
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Or returns t, or def when t is Unset.
func (t Tier) Or(def Tier) Tier {
	if t == Unset {
		return def
	}
	return t
}
