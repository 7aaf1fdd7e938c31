package control

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/veerhq/veer/config"
)

// ErrUnknownDocument: the admin API serves no document under this key.
var ErrUnknownDocument = errors.New("unknown document")

// DocumentKeys lists every document key the admin API serves: Documents,
// those of Options.Documents, and routing/whitelists/<name>.
func (s *Service) DocumentKeys() []string {
	keys := slices.Clone(Documents)
	keys = append(keys, slices.Sorted(maps.Keys(s.extraDocs))...)
	return append(keys, KeyWhitelists+"<name>")
}

// knownDocument reports whether the admin API serves key.
func (s *Service) knownDocument(key string) bool {
	if slices.Contains(Documents, key) {
		return true
	}
	if _, ok := s.extraDocs[key]; ok {
		return true
	}
	name, ok := strings.CutPrefix(key, KeyWhitelists)
	return ok && name != "" && !strings.Contains(name, "/")
}

// checkDocument validates a document for a write: a known key, decoded
// strictly and valid on its own and against the current table. Errors
// read "key:line: field: problem" (config.Parse's form, also for the
// decoder's syntax, type and unknown-field errors, JSON or YAML).
func (s *Service) checkDocument(key string, data []byte) (any, error) {
	if !s.knownDocument(key) {
		return nil, fmt.Errorf("%w %q; known: %s", ErrUnknownDocument, key, strings.Join(s.DocumentKeys(), ", "))
	}
	doc, err := s.validateDocument(key, data)
	if err == nil {
		err = checkAgainstTable(doc, s.table())
		err = config.Locate(err, key, data)
	}
	return doc, err
}
