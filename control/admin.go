package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/veerhq/veer/store"
)

// AdminHandler serves the admin API (REST + JSON) under /v1/admin/. Every
// request needs "Authorization: Bearer TOKEN": 401 without a valid token,
// 403 when its role is too low, 413 for bodies over MaxAdminBody. Writes
// take If-Match (the version read; 409 on conflict) and X-Veer-Reason, and
// are recorded in the audit log with the token's name.
func (s *Service) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, need func(*http.Request) Role, f func(http.ResponseWriter, *http.Request, principal)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			p := s.tokens.authenticate(r)
			if p.role == RoleNone {
				w.Header().Set("WWW-Authenticate", `Bearer realm="veer"`)
				httpError(w, http.StatusUnauthorized, "missing or unknown token")
				return
			}
			if role := need(r); p.role < role {
				httpError(w, http.StatusForbidden, fmt.Sprintf("%s role needed, token %q is %s", role, p.name, p.role))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, MaxAdminBody)
			f(w, r, p)
		})
	}
	viewer, operator, admin := fixedRole(RoleViewer), fixedRole(RoleOperator), fixedRole(RoleAdmin)
	h("GET /v1/admin/whoami", viewer, func(w http.ResponseWriter, r *http.Request, p principal) {
		writeJSON(w, http.StatusOK, map[string]string{"name": p.name, "role": p.role.String()})
	})
	h("GET /v1/admin/docs", viewer, s.listDocs)
	h("GET /v1/admin/docs/{key...}", viewer, s.getDoc)
	h("PUT /v1/admin/docs/{key...}", keyWriteRole, s.putDoc)
	h("DELETE /v1/admin/docs/{key...}", admin, s.deleteDoc)
	h("GET /v1/admin/history/{key...}", viewer, s.history)
	h("GET /v1/admin/audit", viewer, s.history)
	h("POST /v1/admin/rollback/{key...}", keyWriteRole, s.rollback)
	h("POST /v1/admin/playbook", operator, s.playbook)
	h("GET /v1/admin/rollouts/{route}", viewer, s.getRolloutAPI)
	h("POST /v1/admin/rollouts/{route}", operator, s.postRolloutAPI)
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// storeError maps a store error to its status code.
func storeError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, store.ErrConflict):
		httpError(w, http.StatusConflict, err.Error())
	case errors.Is(err, store.ErrNotFound):
		httpError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, store.ErrInvalid):
		httpError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, store.ErrUnavailable):
		w.Header().Set("Retry-After", "5")
		httpError(w, http.StatusServiceUnavailable, "store unavailable, writes are refused (answers continue from the last snapshot): "+err.Error())
	default:
		httpError(w, http.StatusInternalServerError, err.Error())
	}
}

// readBody reads a request body, answering 413 past MaxAdminBody.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", MaxAdminBody))
		} else {
			httpError(w, http.StatusBadRequest, err.Error())
		}
		return nil, false
	}
	return b, true
}

// ParseIfMatch reads an If-Match header: a version, quoted or not; empty
// means store.Any.
func ParseIfMatch(h string) (int64, error) {
	h = strings.TrimSpace(h)
	if h == "" || h == "*" {
		return store.Any, nil
	}
	v, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(h, "W/"), `"`), 10, 64)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("If-Match %q: want a document version", h)
	}
	return v, nil
}

func fixedRole(r Role) func(*http.Request) Role { return func(*http.Request) Role { return r } }

// WriteRole is the role needed to write (PUT, roll back) the document key:
// operator for the playbook documents (routing/state, routing/emergency),
// admin for every other.
func WriteRole(key string) Role {
	if slices.Contains(operatorKeys, key) {
		return RoleOperator
	}
	return RoleAdmin
}

func keyWriteRole(r *http.Request) Role { return WriteRole(r.PathValue("key")) }

// writeFor reads a write's preconditions and builds its store.Write (the
// role was checked by the handler: WriteRole).
func writeFor(w http.ResponseWriter, r *http.Request, p principal) (store.Write, Precondition, bool) {
	pre, err := ParsePreconditions(r.Header.Get("If-Match"), r.Header.Get("If-None-Match"))
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return store.Write{}, Precondition{}, false
	}
	return store.Write{Author: p.name, Reason: r.Header.Get("X-Veer-Reason")}, pre, true
}

type docInfo struct {
	Key      string `json:"key"`
	Version  int64  `json:"version"`
	Revision int64  `json:"revision"`
}

func (s *Service) listDocs(w http.ResponseWriter, r *http.Request, _ principal) {
	docs, rev, err := s.st.List(r.Context(), r.URL.Query().Get("prefix"))
	if err != nil {
		storeError(w, err)
		return
	}
	out := []docInfo{}
	for _, d := range docs {
		out = append(out, docInfo{d.Key, d.Version, d.Revision})
	}
	writeJSON(w, http.StatusOK, map[string]any{"revision": rev, "docs": out})
}

func (s *Service) getDoc(w http.ResponseWriter, r *http.Request, _ principal) {
	d, err := s.st.Get(r.Context(), r.PathValue("key"))
	if err != nil {
		storeError(w, err)
		return
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(d.Version, 10)))
	w.Header().Set("X-Veer-Revision", strconv.FormatInt(d.Revision, 10))
	w.Header().Set("Content-Type", "application/json")
	w.Write(d.Value)
}

func (s *Service) putDoc(w http.ResponseWriter, r *http.Request, p principal) {
	key := r.PathValue("key")
	wr, pre, ok := writeFor(w, r, p)
	if !ok {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	doc, err := s.checkDocument(key, body)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	if dry := r.URL.Query().Get("dry_run"); dry != "" && dry != "false" {
		s.dryRun(w, r, key, doc)
		return
	}
	var d store.Doc
	err = s.conditional(r.Context(), key, pre, wr, func(wr store.Write) (err error) {
		d, err = s.st.Put(r.Context(), key, body, wr)
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(d.Version, 10)))
	writeJSON(w, http.StatusOK, docInfo{d.Key, d.Version, d.Revision})
}

func (s *Service) deleteDoc(w http.ResponseWriter, r *http.Request, p principal) {
	key := r.PathValue("key")
	wr, pre, ok := writeFor(w, r, p)
	if !ok {
		return
	}
	err := s.conditional(r.Context(), key, pre, wr, func(wr store.Write) error {
		return s.st.Delete(r.Context(), key, wr)
	})
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// history serves a key's history (exact key) or the audit log (every key
// under ?prefix=), newest first, at most ?limit= entries (default 100).
func (s *Service) history(w http.ResponseWriter, r *http.Request, _ principal) {
	limit := 100
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 10000 {
			httpError(w, http.StatusBadRequest, "limit: want 1..10000")
			return
		}
		limit = n
	}
	key := r.PathValue("key")
	prefix := key
	if key == "" {
		prefix = r.URL.Query().Get("prefix")
	}
	chs, err := s.st.History(r.Context(), prefix, 0)
	if err != nil {
		storeError(w, err)
		return
	}
	out := make([]auditEntry, 0, min(limit, len(chs)))
	for _, c := range chs {
		if key != "" && c.Key != key {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, newAuditEntry(c))
	}
	writeJSON(w, http.StatusOK, out)
}

// auditEntry shows before/after as JSON when they are JSON.
type auditEntry struct {
	store.Change
	Before any `json:"before,omitempty"`
	After  any `json:"after,omitempty"`
}

func newAuditEntry(c store.Change) auditEntry {
	show := func(b []byte) any {
		if b == nil {
			return nil
		}
		if json.Valid(b) {
			return json.RawMessage(b)
		}
		return string(b)
	}
	return auditEntry{Change: c, Before: show(c.Before), After: show(c.After)}
}

// rollback writes the value of an earlier version as a new version.
func (s *Service) rollback(w http.ResponseWriter, r *http.Request, p principal) {
	key := r.PathValue("key")
	wr, pre, ok := writeFor(w, r, p)
	if !ok {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req struct {
		Version int64  `json:"version"`
		Reason  string `json:"reason"`
	}
	if err := strictJSON(body, &req); err != nil || req.Version < 1 {
		httpError(w, http.StatusBadRequest, fmt.Sprintf(`want {"version": N, "reason": "..."}: %v`, err))
		return
	}
	chs, err := s.st.History(r.Context(), key, 0)
	if err != nil {
		storeError(w, err)
		return
	}
	i := slices.IndexFunc(chs, func(c store.Change) bool { return c.Key == key && c.Version == req.Version })
	if i < 0 || chs[i].Deleted {
		httpError(w, http.StatusNotFound, fmt.Sprintf("%s has no version %d to roll back to", key, req.Version))
		return
	}
	if _, err := s.checkDocument(key, chs[i].After); err != nil {
		httpError(w, http.StatusConflict, fmt.Sprintf("version %d no longer validates: %v", req.Version, err))
		return
	}
	wr.Reason = strings.TrimSpace(fmt.Sprintf("rollback to version %d: %s %s", req.Version, req.Reason, wr.Reason))
	var d store.Doc
	err = s.conditional(r.Context(), key, pre, wr, func(wr store.Write) (err error) {
		d, err = s.st.Put(r.Context(), key, chs[i].After, wr)
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, docInfo{d.Key, d.Version, d.Revision})
}

// strictJSON decodes one JSON value, rejecting unknown fields.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}
