package shed

import (
	"errors"
	"fmt"
)

// Reason says why a request was shed.
type Reason uint8

// The reasons.
const (
	// ReasonOverload: the endpoint was overloaded and the request waited
	// longer than 2 × target (CoDel drop).
	ReasonOverload Reason = iota
	// ReasonTier: the endpoint was overloaded and shedding a higher tier,
	// so this lower-tier request was rejected on arrival.
	ReasonTier
	// ReasonQueueFull: the endpoint's queue was full.
	ReasonQueueFull
	// ReasonDeadline: the request's deadline would pass before it could
	// start.
	ReasonDeadline
	numReasons
)

var reasonNames = [numReasons]string{"overload", "tier", "queue_full", "deadline"}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// ErrShed matches (errors.Is) every rejection of a Shedder.
var ErrShed = errors.New("shed: request shed")

// Rejection is the error returned for a shed request.
type Rejection struct {
	Reason Reason
}

func (e *Rejection) Error() string { return "shed: request shed: " + e.Reason.String() }

// Is makes errors.Is(err, ErrShed) true.
func (e *Rejection) Is(target error) bool { return target == ErrShed }

// Preallocated rejections: shedding must be cheap, so a reject allocates
// nothing.
var rejections = [numReasons]*Rejection{
	{ReasonOverload}, {ReasonTier}, {ReasonQueueFull}, {ReasonDeadline},
}

func reject(r Reason) error { return rejections[r] }
