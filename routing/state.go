package routing

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/veerhq/veer/internal/atomicfile"
)

// stateVersion is the state file's format version.
const stateVersion = 1

// stateFile is the persisted last verified answer: the signed body as the
// service sent it (verified again on load) and when it was received.
type stateFile struct {
	Version  int             `json:"version"`
	Received time.Time       `json:"received"`
	Body     json.RawMessage `json:"body"`
}

type persisted struct {
	answer   Answer
	received time.Time
}

// save writes the state file atomically and durably (internal/atomicfile).
func save(path string, body []byte, now time.Time) error {
	raw, err := json.Marshal(stateFile{Version: stateVersion, Received: now.UTC(), Body: body})
	if err != nil {
		return err
	}
	return atomicfile.Write(path, raw)
}

// load reads and re-verifies the state file: the signature, and that the
// answer serves deviceID at now (Answer.Check). A file persisted before
// answers were bound (or by another device) is refused with ErrUnbound
// (ErrOtherDevice) and ignored like a corrupt one.
func load(path string, keys []ed25519.PublicKey, deviceID string, now time.Time) (persisted, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return persisted{}, err
	}
	p, err := parseState(raw, keys)
	if err != nil {
		return persisted{}, err
	}
	if err := p.answer.Check(deviceID, now); err != nil {
		return persisted{}, err
	}
	return p, nil
}

func parseState(raw []byte, keys []ed25519.PublicKey) (persisted, error) {
	if len(raw) > 2*MaxAnswerBody {
		return persisted{}, fmt.Errorf("routing: state file of %d bytes", len(raw))
	}
	var s stateFile
	if err := json.Unmarshal(raw, &s); err != nil {
		return persisted{}, fmt.Errorf("routing: corrupt state file: %w", err)
	}
	if s.Version != stateVersion {
		return persisted{}, fmt.Errorf("routing: state file version %d, want %d", s.Version, stateVersion)
	}
	a, err := Verify(s.Body, keys)
	if err != nil {
		return persisted{}, err
	}
	return persisted{answer: a, received: s.Received}, nil
}
