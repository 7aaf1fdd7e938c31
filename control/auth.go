package control

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/veerhq/veer/config"
)

// Role is what a token may do; each role includes the ones below it.
type Role int

// Roles.
const (
	// RoleNone: no valid token.
	RoleNone Role = iota
	// RoleViewer reads documents, history and the audit log.
	RoleViewer
	// RoleOperator also runs playbooks (site/cluster down/up, emergency
	// overrides) and edits routing/state and routing/emergency.
	RoleOperator
	// RoleAdmin also edits every document, deletes and rolls back.
	RoleAdmin
)

var roleNames = map[string]Role{"viewer": RoleViewer, "operator": RoleOperator, "admin": RoleAdmin}

func (r Role) String() string {
	for n, v := range roleNames {
		if v == r {
			return n
		}
	}
	return "none"
}

func (t Token) validate() error {
	if t.Name == "" {
		return config.Field("name", "required")
	}
	if roleNames[t.Role] == RoleNone {
		return config.Field("role", "%q: want viewer, operator or admin", t.Role)
	}
	if b, err := hex.DecodeString(t.SHA256); err != nil || len(b) != sha256.Size {
		return config.Field("sha256", "want 64 hex digits (sha256sum of the token)")
	}
	return nil
}

// BearerToken reads the token of an Authorization header value:
// "Bearer TOKEN", the scheme in any case, one or more spaces after it (RFC
// 9110 §11.1 and §11.4, RFC 6750 §2.1). ok is false for another scheme, a
// missing or empty token, or a token with a space or control character in it.
func BearerToken(h string) (tok string, ok bool) {
	scheme, rest, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	tok = strings.TrimLeft(rest, " ")
	if tok == "" {
		return "", false
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c == 0x7f {
			return "", false
		}
	}
	return tok, true
}

// principal is an authenticated token holder.
type principal struct {
	name string
	role Role
}

type tokenEntry struct {
	sum  [sha256.Size]byte
	name string
	role Role
}

// tokens authenticates bearer tokens. The presented token is hashed and
// compared, in constant time, with every known hash; tokens are never
// logged.
type tokens struct{ entries []tokenEntry }

func newTokens(admin string, cfg []Token) *tokens {
	ts := &tokens{}
	if admin != "" {
		ts.entries = append(ts.entries, tokenEntry{sum: sha256.Sum256([]byte(admin)), name: "admin", role: RoleAdmin})
	}
	for _, t := range cfg {
		var e tokenEntry
		hex.Decode(e.sum[:], []byte(t.SHA256))
		e.name, e.role = t.Name, roleNames[t.Role]
		ts.entries = append(ts.entries, e)
	}
	return ts
}

// authenticate returns the request's principal (role RoleNone when the
// token is missing or unknown).
func (ts *tokens) authenticate(r *http.Request) principal {
	tok, ok := BearerToken(r.Header.Get("Authorization"))
	if !ok {
		return principal{}
	}
	sum := sha256.Sum256([]byte(tok))
	var found principal
	for _, e := range ts.entries {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
			found = principal{name: e.name, role: e.role}
		}
	}
	return found
}
