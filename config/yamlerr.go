package config

import (
	"errors"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decodeError turns the YAML decoder's error into errors of the house form
// "file:line: field.path: why": a syntax error keeps its line, and each
// entry of a type error (a wrong type, an unknown or duplicate field)
// becomes one *ParseError naming the field found at its line in root. The
// decoder reports these as strings only ("line 4: field x not found in
// type T"), so this is the one place that reads them.
func decodeError(err error, file string, root *yaml.Node) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		line, msg := splitLine(strings.TrimPrefix(err.Error(), "yaml: "))
		return &ParseError{File: file, Line: line, Err: errors.New(msg)}
	}
	out := make([]error, 0, len(te.Errors))
	for _, s := range te.Errors {
		line, msg := splitLine(s)
		field, why := describe(root, line, msg)
		out = append(out, &ParseError{File: file, Line: line, Field: field, Err: errors.New(why)})
	}
	return errors.Join(out...)
}

// splitLine splits "line 4: msg" into 4 and "msg"; 0 when there is no line.
func splitLine(s string) (int, string) {
	rest, ok := strings.CutPrefix(s, "line ")
	if !ok {
		return 0, s
	}
	num, msg, ok := strings.Cut(rest, ": ")
	n, err := strconv.Atoi(num)
	if !ok || err != nil {
		return 0, s
	}
	return n, msg
}

// describe names the field a type-error message at line is about and says
// what is wrong in the user's terms.
func describe(root *yaml.Node, line int, msg string) (field, why string) {
	if name, ok := strings.CutPrefix(msg, "field "); ok {
		name, rest, _ := strings.Cut(name, " ")
		field = findKey(root, line, name)
		switch {
		case strings.HasPrefix(rest, "not found"):
			return field, "unknown field"
		case strings.HasPrefix(rest, "already set"):
			return field, "set twice"
		}
		return field, msg
	}
	if rest, ok := strings.CutPrefix(msg, "mapping key "); ok {
		quoted, first, _ := strings.Cut(rest, " already defined at line ")
		name, err := strconv.Unquote(quoted)
		if err != nil {
			name = quoted
		}
		return findKey(root, line, name), "written twice (first at line " + first + ")"
	}
	if rest, ok := strings.CutPrefix(msg, "cannot unmarshal "); ok {
		tag, rest, _ := strings.Cut(rest, " ")
		value := ""
		if strings.HasPrefix(rest, "`") {
			if i := strings.Index(rest[1:], "`"); i >= 0 {
				value, rest = rest[1:1+i], strings.TrimPrefix(rest[2+i:], " ")
			}
		}
		into := strings.TrimPrefix(rest, "into ")
		path, n := findValue(root, line, tag, strings.TrimSuffix(value, "..."))
		got := tag
		if n != nil && n.Kind == yaml.ScalarNode {
			got = strconv.Quote(n.Value)
		}
		return path, "want " + want(into) + ", got " + got
	}
	return "", msg
}

// want says in words what a Go type named by the decoder takes.
func want(typ string) string {
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

// findKey returns the path of the mapping key name written at line.
func findKey(root *yaml.Node, line int, name string) string {
	var found string
	walk(root, "", func(path string, key, val *yaml.Node) bool {
		if key != nil && key.Line == line && key.Value == name {
			found = path
			return true
		}
		return false
	})
	return found
}

// findValue returns the path and node of the value at line whose kind
// matches tag (and whose text starts with prefix, for a scalar).
func findValue(root *yaml.Node, line int, tag, prefix string) (string, *yaml.Node) {
	var found string
	var node *yaml.Node
	walk(root, "", func(path string, _, val *yaml.Node) bool {
		if val.Line != line {
			return false
		}
		ok := false
		switch tag {
		case "!!map":
			ok = val.Kind == yaml.MappingNode
		case "!!seq":
			ok = val.Kind == yaml.SequenceNode
		default:
			ok = val.Kind == yaml.ScalarNode && strings.HasPrefix(val.Value, prefix)
		}
		if ok {
			found, node = path, val
		}
		return ok
	})
	return found, node
}

// walk visits every value under n in document order with its field path
// ("a.b[2].c") and, for a mapping value, its key; it stops when visit
// returns true. Aliases are not followed (a document may alias itself).
func walk(n *yaml.Node, path string, visit func(path string, key, val *yaml.Node) bool) bool {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if walk(c, path, visit) {
				return true
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			if visit(p, k, v) || walk(v, p, visit) {
				return true
			}
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			if visit(p, nil, v) || walk(v, p, visit) {
				return true
			}
		}
	}
	return false
}
