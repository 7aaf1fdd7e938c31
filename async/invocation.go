package async

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// State is where an invocation is in its life.
type State string

// The states. Queued and Retrying wait for a worker; Running has one;
// Succeeded and Failed are final.
const (
	Queued    State = "queued"
	Running   State = "running"
	Retrying  State = "retrying"
	Succeeded State = "succeeded"
	Failed    State = "failed"
)

// Final reports whether s is a final state.
func (s State) Final() bool { return s == Succeeded || s == Failed }

// Invocation is one stored request: what the worker sends upstream.
type Invocation struct {
	// ID is "<stream sequence>-<16 hex digits>": the sequence the store
	// gave the submission, and a nonce (random, or derived from the
	// tenant and idempotency key).
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Group  string `json:"group"`
	Route  string `json:"route"`
	// Method, Host, Path (with query) and Header of the original request.
	Method string      `json:"method"`
	Host   string      `json:"host"`
	Path   string      `json:"path"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
	// Key is the submission's Idempotency-Key, "" when none.
	Key string `json:"key,omitempty"`
	// Callback receives the result when set (Veer-Callback header).
	Callback  string    `json:"callback,omitempty"`
	Submitted time.Time `json:"submitted"`
	// NotBefore: no attempt starts before it (a delayed submission in the
	// timer group; a retry in the retry group: its next attempt).
	NotBefore time.Time `json:"not_before,omitzero"`
}

// Status is what GET /v1/invocations/{id} answers.
type Status struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Group  string `json:"group,omitempty"`
	State  State  `json:"state"`
	// Attempts made so far.
	Attempts int `json:"attempts"`
	// FirstAttempt: when the first attempt started (the retry schedule's
	// 6 h count from it).
	FirstAttempt time.Time `json:"first_attempt,omitzero"`
	// NextAttempt: when a retrying invocation runs again.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	// UpstreamStatus: the HTTP status of the last attempt, 0 when none
	// answered.
	UpstreamStatus int `json:"upstream_status,omitempty"`
	// Reason: why the last attempt failed (the outcome), or why the
	// invocation failed.
	Reason    string    `json:"reason,omitempty"`
	Submitted time.Time `json:"submitted,omitzero"`
	Updated   time.Time `json:"updated,omitzero"`
}

// Errors callers match on.
var (
	// ErrNotFound: no invocation has this id (for this tenant).
	ErrNotFound = errors.New("async: invocation not found")
	// ErrUnavailable: the store could not be reached or did not
	// acknowledge; nothing was accepted.
	ErrUnavailable = errors.New("async: store unavailable")
	// ErrBadKey: a malformed Idempotency-Key.
	ErrBadKey = errors.New("async: malformed Idempotency-Key")
	// ErrBadID: a malformed invocation id.
	ErrBadID = errors.New("async: malformed invocation id")
	// ErrTooLarge: a body above Config.MaxBody.
	ErrTooLarge = errors.New("async: body too large")
	// ErrBadDelay: a malformed or out-of-range Veer-Delay or
	// Veer-Not-Before.
	ErrBadDelay = errors.New("async: malformed delay")
	// ErrClosed: the service is closed.
	ErrClosed = errors.New("async: closed")
)

// FormatID builds an invocation id from its stream sequence and nonce.
func FormatID(seq uint64, nonce string) string { return strconv.FormatUint(seq, 10) + "-" + nonce }

// ParseID splits an id into its stream sequence and nonce, or returns
// ErrBadID.
func ParseID(id string) (seq uint64, nonce string, err error) {
	s, n, ok := strings.Cut(id, "-")
	if !ok || len(n) != 16 || len(s) == 0 || len(s) > 20 {
		return 0, "", ErrBadID
	}
	seq, err = strconv.ParseUint(s, 10, 64)
	if err != nil || seq == 0 || s[0] == '0' {
		return 0, "", ErrBadID
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return 0, "", ErrBadID
		}
	}
	return seq, n, nil
}

// Nonce returns the id nonce of a submission: derived from tenant and key
// when key is set (so that a duplicate's id can be rebuilt from the
// sequence the store reports for the original), random otherwise.
func Nonce(tenant, key string) string {
	if key == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}
	h := sha256.Sum256([]byte(tenant + "\x00" + key))
	return hex.EncodeToString(h[:8])
}

// DedupID is the store's deduplication id of a keyed submission.
func DedupID(tenant, key string) string {
	h := sha256.Sum256([]byte(tenant))
	return hex.EncodeToString(h[:12]) + ":" + key
}

// ParseKey validates an Idempotency-Key header value: an RFC 8941 string
// ("...") or a bare token, 1 to MaxKeyLength visible ASCII characters.
// It returns the key without quotes, "" for an absent header, or ErrBadKey.
func ParseKey(h http.Header) (string, error) {
	vs := h.Values("Idempotency-Key")
	if len(vs) == 0 {
		return "", nil
	}
	if len(vs) > 1 {
		return "", ErrBadKey
	}
	v := vs[0]
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if v == "" || len(v) > MaxKeyLength {
		return "", ErrBadKey
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return "", ErrBadKey
		}
	}
	return v, nil
}

// ParseTenantToken decodes a TenantToken.
func ParseTenantToken(tok string) (string, bool) {
	if tok == "_" {
		return "", true
	}
	b, err := hex.DecodeString(tok)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// TenantToken encodes a tenant as one NATS subject token (hex), so that any
// tenant string is a safe subject.
func TenantToken(tenant string) string {
	if tenant == "" {
		return "_"
	}
	return hex.EncodeToString([]byte(tenant))
}
