package routing

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// Wire-format limits.
const (
	// MaxAnswerBody is the largest signed answer a client accepts.
	MaxAnswerBody = 64 << 10
	// MaxTTLSeconds bounds an answer's ttl_seconds (7 days).
	MaxTTLSeconds = 7 * 24 * 3600
	maxBackups    = 16
	maxDomainLen  = 253
)

// ErrAnswer: a routing answer is malformed or its signature does not verify.
var ErrAnswer = errors.New("routing: invalid answer")

// Request is the body of POST /v1/route.
type Request struct {
	DeviceID   string `json:"device_id"`
	CustomerID string `json:"customer_id,omitempty"`
	App        string `json:"app,omitempty"`
	AppVersion string `json:"app_version,omitempty"`
	Platform   string `json:"platform,omitempty"`
}

// Answer is the session's domain set as decided by the service.
type Answer struct {
	// Primary is the domain the app uses for the session.
	Primary string `json:"primary"`
	// Backups are the failover domains, in order.
	Backups []string `json:"backups"`
	// TTLSeconds is how long a client may reuse the answer when the
	// service cannot be reached.
	TTLSeconds int `json:"ttl_seconds"`
	// Rule names the rule that decided (e.g. "emergency:global",
	// "whitelist:beta", "bucket:shift", "region:east", "default").
	Rule string `json:"rule"`
	// Version is the rule set's revision; equal versions give equal
	// answers for one device.
	Version int64 `json:"version"`
}

// Signed is the response body: the answer's exact JSON bytes and an
// Ed25519 signature over them (standard base64).
type Signed struct {
	Answer    json.RawMessage `json:"answer"`
	KeyID     string          `json:"key_id,omitempty"`
	Signature string          `json:"signature"`
}

// KeyID is the short identifier of a public key: the first 8 bytes of it,
// hex.
func KeyID(pub ed25519.PublicKey) string { return fmt.Sprintf("%x", []byte(pub)[:8]) }

// Sign builds the signed body for a; it is what the service answers.
func Sign(a Answer, key ed25519.PrivateKey) ([]byte, error) {
	payload, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	return json.Marshal(Signed{Answer: payload, KeyID: KeyID(key.Public().(ed25519.PublicKey)),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, payload))})
}

// Verify decodes a signed body, checks its signature against any of keys
// and validates the answer. Errors wrap ErrAnswer.
func Verify(body []byte, keys []ed25519.PublicKey) (Answer, error) {
	if len(body) > MaxAnswerBody {
		return Answer{}, fmt.Errorf("%w: body of %d bytes", ErrAnswer, len(body))
	}
	var s Signed
	if err := json.Unmarshal(body, &s); err != nil {
		return Answer{}, fmt.Errorf("%w: %v", ErrAnswer, err)
	}
	sig, err := base64.StdEncoding.DecodeString(s.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return Answer{}, fmt.Errorf("%w: bad signature encoding", ErrAnswer)
	}
	ok := false
	for _, k := range keys {
		if len(k) == ed25519.PublicKeySize && ed25519.Verify(k, s.Answer, sig) {
			ok = true
			break
		}
	}
	if !ok {
		return Answer{}, fmt.Errorf("%w: signature does not verify with any configured key", ErrAnswer)
	}
	var a Answer
	if err := json.Unmarshal(s.Answer, &a); err != nil {
		return Answer{}, fmt.Errorf("%w: %v", ErrAnswer, err)
	}
	return a, a.validate()
}

func (a Answer) validate() error {
	if !ValidDomain(a.Primary) {
		return fmt.Errorf("%w: primary %q is not a domain", ErrAnswer, a.Primary)
	}
	if len(a.Backups) > maxBackups {
		return fmt.Errorf("%w: %d backups, max %d", ErrAnswer, len(a.Backups), maxBackups)
	}
	for i, b := range a.Backups {
		if !ValidDomain(b) {
			return fmt.Errorf("%w: backups[%d] %q is not a domain", ErrAnswer, i, b)
		}
	}
	if a.TTLSeconds < 0 || a.TTLSeconds > MaxTTLSeconds {
		return fmt.Errorf("%w: ttl_seconds %d out of 0..%d", ErrAnswer, a.TTLSeconds, MaxTTLSeconds)
	}
	return nil
}

// ValidDomain accepts host names and host:port (letters, digits, '-', '.',
// ':' and brackets for IPv6 literals).
func ValidDomain(d string) bool {
	if d == "" || len(d) > maxDomainLen {
		return false
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == ':' || c == '[' || c == ']') {
			return false
		}
	}
	return true
}

// ParsePublicKey decodes a standard-base64 Ed25519 public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("want %d bytes of standard base64", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}
