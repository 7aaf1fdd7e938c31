package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/veerhq/veer/store"
)

// Precondition is what a write's conditional headers ask (RFC 9110 §13.1).
// The zero value is an unconditional write.
type Precondition struct {
	// Version (If-Match: "N"): the document must be at version N; a
	// mismatch is 409 Conflict (the version read is stale).
	Version int64
	// Exists (If-Match: *): the document must exist; 412 Precondition
	// Failed when it does not.
	Exists bool
	// Absent (If-None-Match: *): the document must not exist, so the write
	// only creates; 412 Precondition Failed when it does.
	Absent bool
}

// ErrPrecondition: a write's If-Match: * or If-None-Match: * does not hold
// (412).
var ErrPrecondition = errors.New("control: precondition failed")

// ParsePreconditions reads the If-Match and If-None-Match headers of a
// write: If-Match is empty, "*" or one version (quoted, weak or bare);
// If-None-Match is empty or "*" (a version there is refused: a write
// conditional on "anything but version N" has no use here). Both at once
// are refused.
func ParsePreconditions(ifMatch, ifNoneMatch string) (Precondition, error) {
	ifMatch, ifNoneMatch = strings.TrimSpace(ifMatch), strings.TrimSpace(ifNoneMatch)
	var p Precondition
	switch ifNoneMatch {
	case "":
	case "*":
		p.Absent = true
	default:
		return Precondition{}, fmt.Errorf("If-None-Match %q: only * (create only) is supported on writes", ifNoneMatch)
	}
	if ifMatch == "" {
		return p, nil
	}
	if p.Absent {
		return Precondition{}, errors.New("If-Match and If-None-Match together: use one")
	}
	if ifMatch == "*" {
		return Precondition{Exists: true}, nil
	}
	v, err := ParseIfMatch(ifMatch)
	if err != nil {
		return Precondition{}, err
	}
	return Precondition{Version: v}, nil
}

// maxExistsRetries bounds the re-reads of an If-Match: * write that lost a
// race to another writer of the same (existing) document.
const maxExistsRetries = 8

// conditional runs one store write under p: do gets the store.Write with
// its expectation set. If-Match: * reads the document's version and expects
// it, re-reading when another writer got in between (the document still
// exists, so the precondition still holds).
func (s *Service) conditional(ctx context.Context, key string, p Precondition, wr store.Write, do func(store.Write) error) error {
	switch {
	case p.Absent:
		wr.Expect = store.Absent
		err := do(wr)
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("%w: If-None-Match: * but %s exists", ErrPrecondition, key)
		}
		return err
	case p.Exists:
		for range maxExistsRetries {
			d, err := s.st.Get(ctx, key)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%w: If-Match: * but %s does not exist", ErrPrecondition, key)
			}
			if err != nil {
				return err
			}
			wr.Expect = d.Version
			if err := do(wr); !errors.Is(err, store.ErrConflict) {
				return err
			}
		}
		return fmt.Errorf("%w: %s changed %d times while writing, try again", store.ErrConflict, key, maxExistsRetries)
	default:
		wr.Expect = p.Version
		return do(wr)
	}
}

// writeError answers a failed write: 412 for a failed precondition, else
// the store error's status.
func writeError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrPrecondition) {
		httpError(w, http.StatusPreconditionFailed, err.Error())
		return
	}
	storeError(w, err)
}
