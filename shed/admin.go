package shed

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/veerhq/veer/tier"
)

// Admin API errors.
var (
	// ErrBadChange is returned by ParseChange for a malformed body.
	ErrBadChange = errors.New("shed: bad criticality change")
)

// MaxChangeBody bounds an admin request body.
const MaxChangeBody = 4 << 10

// MaxEndpointLen bounds an endpoint name in an admin change.
const MaxEndpointLen = 256

// Change sets (or, with an empty Tier, removes) the tier of one caller on
// one endpoint at run time. It overrides the config file's table until
// removed; config reloads keep it. Public: it is the admin API's request
// body (ParseChange), which clients and tools encode.
type Change struct {
	Endpoint string `json:"endpoint"`
	Caller   string `json:"caller"`
	// Tier is a tier name; "" removes the override.
	Tier string `json:"tier"`
}

// ParseChange decodes and checks an admin request body: a JSON object with
// exactly the fields of Change.
func ParseChange(body []byte) (Change, tier.Tier, error) {
	var c Change
	if len(body) > MaxChangeBody {
		return c, tier.Unset, fmt.Errorf("%w: body larger than %d bytes", ErrBadChange, MaxChangeBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Change{}, tier.Unset, fmt.Errorf("%w: %v", ErrBadChange, err)
	}
	if dec.More() {
		return Change{}, tier.Unset, fmt.Errorf("%w: trailing data", ErrBadChange)
	}
	if c.Endpoint == "" || len(c.Endpoint) > MaxEndpointLen {
		return Change{}, tier.Unset, fmt.Errorf("%w: endpoint must be 1..%d bytes", ErrBadChange, MaxEndpointLen)
	}
	if c.Caller == "" || len(c.Caller) > tier.MaxCallerLen {
		return Change{}, tier.Unset, fmt.Errorf("%w: caller must be 1..%d bytes", ErrBadChange, tier.MaxCallerLen)
	}
	if c.Tier == "" {
		return c, tier.Unset, nil
	}
	t, err := tier.Parse(c.Tier)
	if err != nil {
		return Change{}, tier.Unset, fmt.Errorf("%w: %v", ErrBadChange, err)
	}
	return c, t, nil
}

// TableEntry is one cell of the endpoint × caller table. Public: Table
// returns it, and it is part of AdminView's JSON.
type TableEntry struct {
	Endpoint string `json:"endpoint"`
	Caller   string `json:"caller"`
	Tier     string `json:"tier"`
	// Source is "file" or "admin" (a run-time override).
	Source string `json:"source"`
}

// AdminView is what the admin handler's GET returns. Public: it is the
// admin API's response schema, which the console and tools decode.
type AdminView struct {
	DefaultTier    string          `json:"default_tier"`
	NeverShed      string          `json:"never_shed"`
	TrustedCallers []string        `json:"trusted_callers"`
	Table          []TableEntry    `json:"table"`
	Endpoints      []EndpointStats `json:"endpoints"`
	Writable       bool            `json:"writable"`
}

// Table returns the endpoint × caller table in force, sorted.
func (s *Shedder) Table() []TableEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []TableEntry
	over := map[tableKey]bool{}
	for k := range s.overrides {
		over[k] = true
	}
	p := s.pol.Load()
	for _, ep := range sortedKeys(p.endpoints) {
		callers := p.endpoints[ep].callers
		for _, c := range sortedKeys(callers) {
			src := "file"
			if over[tableKey{ep, c}] {
				src = "admin"
			}
			out = append(out, TableEntry{Endpoint: ep, Caller: c, Tier: callers[c].String(), Source: src})
		}
	}
	return out
}

// SetCallerTier overrides the tier of caller on endpoint (t == Unset removes
// the override) and logs who changed what. It returns the previous
// override (Unset if none).
func (s *Shedder) SetCallerTier(who, endpoint, caller string, t tier.Tier) tier.Tier {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := tableKey{endpoint, caller}
	old := s.overrides[k]
	if t.Valid() {
		s.overrides[k] = t
	} else {
		delete(s.overrides, k)
	}
	s.publishLocked()
	s.log.Info("shed: criticality changed", "who", who, "endpoint", endpoint, "caller", caller, "from", old.String(), "to", t.String())
	return old
}

// AdminHandler serves the endpoint × caller table: GET returns an AdminView;
// POST (or PUT) with a Change body sets or removes an override. Writes need
// "Authorization: Bearer <token>"; with an empty token the handler is
// read-only. Every change is logged with who made it (the Veer-Admin-User
// header, if any, and the remote address) and what changed.
func (s *Shedder) AdminHandler(token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			p := s.pol.Load()
			v := AdminView{
				DefaultTier: p.defTier.String(),
				NeverShed:   p.neverShed.String(),
				Table:       s.Table(),
				Endpoints:   s.Stats(),
				Writable:    token != "",
			}
			v.TrustedCallers = sortedKeys(p.trusted)
			writeJSON(w, http.StatusOK, v)
		case http.MethodPost, http.MethodPut:
			if token == "" {
				writeJSON(w, http.StatusForbidden, map[string]string{"error": "read-only: no admin token configured"})
				return
			}
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "admin token required"})
				return
			}
			body, err := io.ReadAll(io.LimitReader(r.Body, MaxChangeBody+1))
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
				return
			}
			c, t, err := ParseChange(body)
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
				return
			}
			old := s.SetCallerTier(adminWho(r), c.Endpoint, c.Caller, t)
			writeJSON(w, http.StatusOK, map[string]string{"endpoint": c.Endpoint, "caller": c.Caller, "from": old.String(), "to": t.String()})
		default:
			w.Header().Set("Allow", "GET, HEAD, POST, PUT")
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed"})
		}
	})
}

// AdminUserHeader names the operator making an admin change (for the log).
const AdminUserHeader = "Veer-Admin-User"

func adminWho(r *http.Request) string {
	u := r.Header.Get(AdminUserHeader)
	if len(u) > 64 {
		u = u[:64]
	}
	if u == "" {
		return r.RemoteAddr
	}
	return u + "@" + r.RemoteAddr
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
