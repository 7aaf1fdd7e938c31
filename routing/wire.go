package routing

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Wire-format limits.
const (
	// MaxAnswerBody is the largest signed answer a client accepts.
	MaxAnswerBody = 64 << 10
	// MaxTTLSeconds bounds an answer's ttl_seconds (7 days).
	MaxTTLSeconds = 7 * 24 * 3600
	maxBackups    = 16
	maxDomainLen  = 253
	// MaxClockSkew is how far the client's clock may be behind or ahead
	// of the service's when Check compares an answer's expires_at with it.
	MaxClockSkew = 5 * time.Minute
)

// Errors. ErrExpired, ErrOtherDevice and ErrUnbound are the refusals of
// Answer.Check; every refusal of Verify wraps ErrAnswer.
var (
	// ErrAnswer: a routing answer is malformed or its signature does not
	// verify.
	ErrAnswer = errors.New("routing: invalid answer")
	// ErrExpired: the answer's expires_at (plus MaxClockSkew) has passed.
	ErrExpired = errors.New("routing: answer expired")
	// ErrOtherDevice: the answer was given to another device.
	ErrOtherDevice = errors.New("routing: answer for another device")
	// ErrUnbound: the answer carries no device binding or no expiry (it
	// was signed by a veer control older than the binding, or forged
	// from such an answer); it is refused like a forged one.
	ErrUnbound = errors.New("routing: answer not bound to a device and an expiry")
)

// Request is the body of POST /v1/route.
type Request struct {
	DeviceID   string `json:"device_id"`
	CustomerID string `json:"customer_id,omitempty"`
	App        string `json:"app,omitempty"`
	AppVersion string `json:"app_version,omitempty"`
	Platform   string `json:"platform,omitempty"`
}

// Subject is the identity an answer to r is bound to (Answer.Bind,
// Answer.Check): the device ID, or for a request that names only a
// customer "customer:" and its ID, so that customer-only answers are not
// all bound to the hash of an empty device ID (and valid for each other).
func (r Request) Subject() string {
	if r.DeviceID == "" && r.CustomerID != "" {
		return "customer:" + r.CustomerID
	}
	return r.DeviceID
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
	// IssuedAt is when the service signed the answer (Unix seconds).
	IssuedAt int64 `json:"issued_at,omitempty"`
	// ExpiresAt is IssuedAt + TTLSeconds (Unix seconds): past it the
	// answer is refused (ErrExpired), whoever presents it.
	ExpiresAt int64 `json:"expires_at,omitempty"`
	// DeviceSHA256 is DeviceHash of the request's device_id: the answer
	// serves that device only (ErrOtherDevice).
	DeviceSHA256 string `json:"device_sha256,omitempty"`
}

// DeviceHash is the hex SHA-256 of a device ID, as Answer.DeviceSHA256
// carries it (the ID itself is not echoed).
func DeviceHash(deviceID string) string {
	sum := sha256.Sum256([]byte(deviceID))
	return hex.EncodeToString(sum[:])
}

// Bind returns a as given to deviceID at now: IssuedAt now (whole
// seconds), ExpiresAt TTLSeconds later, DeviceSHA256 the device's hash.
// The service signs bound answers only.
func (a Answer) Bind(deviceID string, now time.Time) Answer {
	a.IssuedAt = now.Unix()
	a.ExpiresAt = a.IssuedAt + int64(a.TTLSeconds)
	a.DeviceSHA256 = DeviceHash(deviceID)
	return a
}

// Check refuses a verified answer that does not serve deviceID at now:
// ErrUnbound without a binding, ErrOtherDevice for another device's,
// ErrExpired once ExpiresAt + MaxClockSkew has passed.
func (a Answer) Check(deviceID string, now time.Time) error {
	if a.DeviceSHA256 == "" || a.ExpiresAt == 0 {
		return ErrUnbound
	}
	if a.DeviceSHA256 != DeviceHash(deviceID) {
		return ErrOtherDevice
	}
	if exp := time.Unix(a.ExpiresAt, 0).Add(MaxClockSkew); !now.Before(exp) {
		return fmt.Errorf("%w at %s (now %s)", ErrExpired, time.Unix(a.ExpiresAt, 0).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// VerifyFor is Verify followed by Check: the answer a client may use.
func VerifyFor(body []byte, keys []ed25519.PublicKey, deviceID string, now time.Time) (Answer, error) {
	a, err := Verify(body, keys)
	if err != nil {
		return Answer{}, err
	}
	if err := a.Check(deviceID, now); err != nil {
		return Answer{}, err
	}
	return a, nil
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
	if a.IssuedAt < 0 || a.ExpiresAt < a.IssuedAt || a.ExpiresAt-a.IssuedAt > MaxTTLSeconds {
		return fmt.Errorf("%w: issued_at %d, expires_at %d: want 0 <= issued_at <= expires_at <= issued_at+%d", ErrAnswer, a.IssuedAt, a.ExpiresAt, MaxTTLSeconds)
	}
	if a.DeviceSHA256 != "" {
		if b, err := hex.DecodeString(a.DeviceSHA256); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("%w: device_sha256: want %d hex digits", ErrAnswer, 2*sha256.Size)
		}
	}
	return nil
}

// Prepared is an answer encoded once for many bound signatures: the
// service decides one Answer for many devices and signs it for each
// (AppendSigned) without encoding it again.
type Prepared struct {
	// Answer is the unbound answer.
	Answer
	head []byte // its JSON without the closing brace
}

// Prepare encodes a (its binding fields are dropped: AppendSigned sets
// them).
func Prepare(a Answer) Prepared {
	a.IssuedAt, a.ExpiresAt, a.DeviceSHA256 = 0, 0, ""
	b, err := json.Marshal(a)
	if err != nil {
		panic("routing: cannot encode an answer: " + err.Error()) // strings and ints only
	}
	return Prepared{Answer: a, head: b[:len(b)-1]}
}

// AppendSigned appends to dst the signed body (Signed's JSON) of
// p.Answer.Bind(deviceID, now) and a newline. keyID is KeyID of key's
// public half. Its answer bytes decode to exactly the bound answer.
func (p Prepared) AppendSigned(dst []byte, key ed25519.PrivateKey, keyID, deviceID string, now time.Time) []byte {
	head := p.head
	if head == nil { // a Prepared not made by Prepare
		head = Prepare(p.Answer).head
	}
	issued := now.Unix()
	sum := sha256.Sum256([]byte(deviceID))
	dst = append(dst, `{"answer":`...)
	start := len(dst)
	dst = append(dst, head...)
	dst = append(dst, `,"issued_at":`...)
	dst = strconv.AppendInt(dst, issued, 10)
	dst = append(dst, `,"expires_at":`...)
	dst = strconv.AppendInt(dst, issued+int64(p.TTLSeconds), 10)
	dst = append(dst, `,"device_sha256":"`...)
	dst = hex.AppendEncode(dst, sum[:])
	dst = append(dst, `"}`...)
	sig := ed25519.Sign(key, dst[start:])
	dst = append(dst, `,"key_id":"`...)
	dst = append(dst, keyID...)
	dst = append(dst, `","signature":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, sig)
	return append(dst, "\"}\n"...)
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
