package control

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

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
// read "key:line: field: problem" (DocumentError).
func (s *Service) checkDocument(key string, data []byte) (any, error) {
	if !s.knownDocument(key) {
		return nil, fmt.Errorf("%w %q; known: %s", ErrUnknownDocument, key, strings.Join(s.DocumentKeys(), ", "))
	}
	doc, err := s.validateDocument(key, data)
	if err == nil {
		err = checkAgainstTable(doc, s.table())
		err = config.Locate(err, key, data)
	}
	return doc, DocumentError(err, key, data)
}

// DocumentError puts the decoder's errors about the document key (data,
// YAML or JSON) in the house form "key:line: field: problem": a syntax
// error, an unknown or duplicate field, a value of the wrong type. The
// field is the path of the node the decoder names ("sites[0].clusterz").
// Other errors (a *config.FieldError from Validate, already in that form)
// pass unchanged; nil is nil.
//
// It reads the messages of go.yaml.in/yaml/v3 (a pinned version, whose
// decoder offers nothing but text: "line N: field x not found in type T");
// TestDocumentErrorForms holds every form it converts. A *config.ParseError
// that does not carry the decoder's text (config already gave it the house
// form) passes unchanged.
func DocumentError(err error, key string, data []byte) error {
	if err == nil {
		return nil
	}
	var pe *config.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	var te *yaml.TypeError
	if !errors.As(pe.Err, &te) && !strings.HasPrefix(pe.Err.Error(), "yaml: ") {
		return err // not the decoder's text: already in the house form
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		root = yaml.Node{}
	}
	if te != nil {
		out := make([]error, 0, len(te.Errors))
		for _, m := range te.Errors {
			out = append(out, typeError(key, &root, m))
		}
		return errors.Join(out...)
	}
	msg := strings.TrimPrefix(pe.Err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ": "); ok {
			if v, err := strconv.Atoi(n); err == nil && v > 0 {
				line, msg = v, tail
			}
		}
	}
	return &config.FieldError{File: key, Line: line, Err: errors.New(msg)}
}

// typeError converts one of yaml.TypeError's messages.
func typeError(key string, root *yaml.Node, m string) error {
	fe := &config.FieldError{File: key, Err: errors.New(m)}
	rest, ok := strings.CutPrefix(m, "line ")
	if !ok {
		return fe
	}
	n, msg, ok := strings.Cut(rest, ": ")
	line, err := strconv.Atoi(n)
	if !ok || err != nil || line < 1 {
		return fe
	}
	fe.Line, fe.Err = line, errors.New(msg)
	keyAt := func(name string) func(k, v *yaml.Node) bool {
		return func(k, _ *yaml.Node) bool { return k != nil && k.Line == line && k.Value == name }
	}
	switch {
	case strings.HasPrefix(msg, "field ") && strings.Contains(msg, " not found in type "):
		name, _, _ := strings.Cut(strings.TrimPrefix(msg, "field "), " not found in type ")
		fe.Field, _ = findPath(root, keyAt(name))
		fe.Err = errors.New("unknown field")
	case strings.HasPrefix(msg, "field ") && strings.Contains(msg, " already set in type "):
		name, _, _ := strings.Cut(strings.TrimPrefix(msg, "field "), " already set in type ")
		fe.Field, _ = findPath(root, keyAt(name))
		fe.Err = errors.New("set twice")
	case strings.HasPrefix(msg, "mapping key "):
		q, first, _ := strings.Cut(strings.TrimPrefix(msg, "mapping key "), " already defined at line ")
		if name, err := strconv.Unquote(q); err == nil {
			fe.Field, _ = findPath(root, keyAt(name))
		}
		fe.Err = fmt.Errorf("written twice (first at line %s)", first)
	case strings.HasPrefix(msg, "cannot unmarshal "):
		// "cannot unmarshal !!str `abc` into int"; the value is cut to 7
		// bytes and "..." when longer than 10.
		what, into, _ := strings.Cut(strings.TrimPrefix(msg, "cannot unmarshal "), " into ")
		tag, val, _ := strings.Cut(what, " ")
		val = strings.Trim(val, "`")
		prefix, cut := strings.CutSuffix(val, "...")
		var found *yaml.Node
		fe.Field, _ = findPath(root, func(_, v *yaml.Node) bool {
			if v.Line != line {
				return false
			}
			ok := false
			switch tag {
			case "!!seq":
				ok = v.Kind == yaml.SequenceNode
			case "!!map":
				ok = v.Kind == yaml.MappingNode
			default:
				ok = v.Kind == yaml.ScalarNode && (v.Value == val || cut && strings.HasPrefix(v.Value, prefix))
			}
			if ok {
				found = v
			}
			return ok
		})
		got := tag
		if found != nil && found.Kind == yaml.ScalarNode {
			got = strconv.Quote(found.Value)
		}
		fe.Err = fmt.Errorf("want %s, got %s", wantType(into), got)
	}
	return fe
}

// wantType says in words what a Go type named by the decoder takes (the
// words config's own conversion uses on the gw2 branch, so that both read
// alike).
func wantType(typ string) string {
	switch {
	case typ == "time.Duration":
		return `a duration such as "2s" or "500ms"`
	case typ == "bool":
		return "true or false"
	case typ == "string":
		return "a string"
	case strings.HasPrefix(typ, "[]"):
		return "a list"
	case strings.HasPrefix(typ, "map["):
		return "a mapping"
	case strings.HasPrefix(typ, "int"), strings.HasPrefix(typ, "uint"):
		return "an integer"
	case strings.HasPrefix(typ, "float"):
		return "a number"
	}
	return "a value of type " + typ
}

// findPath walks the document depth first and returns the path
// ("a.b[2].c") of the first node for which match(key, value) holds; key is
// nil for sequence items and the root.
func findPath(root *yaml.Node, match func(k, v *yaml.Node) bool) (string, bool) {
	var walk func(n *yaml.Node, path string, depth int) (string, bool)
	walk = func(n *yaml.Node, path string, depth int) (string, bool) {
		if depth > 64 {
			return "", false
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if p, ok := walk(c, path, depth+1); ok {
					return p, true
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if match(k, v) {
					return p, true
				}
				if r, ok := walk(v, p, depth+1); ok {
					return r, true
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := path + "[" + strconv.Itoa(i) + "]"
				if match(nil, c) {
					return p, true
				}
				if r, ok := walk(c, p, depth+1); ok {
					return r, true
				}
			}
		}
		return "", false
	}
	return walk(root, "", 0)
}
