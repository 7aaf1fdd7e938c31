// Package config loads veer's configuration files: YAML or JSON decoded into
// plain structs, strictly (an unknown field is an error), then validated, with
// every error naming the file, the field and its line.
//
// A config type is a plain struct with yaml (and json) tags whose zero value
// works. If it implements Validator, Parse calls Validate after decoding;
// Validate reports problems with Field or Errorf so that Parse can attach the
// line where the field was written.
//
// The package depends on the YAML decoder only, so a library that validates
// its config with Field and In pays for nothing else. Hot reload (a file
// watcher with metrics) lives in the sub-package config/watch.
//
// Failure mode: Load and Parse return the error (a *ParseError for syntax and
// unknown fields, *FieldErrors joined for invalid values); they never fill in
// a default for a value that is present and wrong.
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize bounds a config file; larger files are rejected unread.
const MaxFileSize = 16 << 20

// Validator is implemented by config structs that check themselves.
// Validate must be pure: no I/O, no side effects on shared state.
type Validator interface {
	Validate() error
}

// FieldError is a problem with one field. Field is its path in the file's
// own key names, e.g. "endpoints[2].target". Line and File are filled in by
// Parse when the field appears in the file.
type FieldError struct {
	File  string
	Line  int
	Field string
	Err   error
}

// Field returns a FieldError for path with a formatted message.
func Field(path, format string, args ...any) *FieldError {
	return &FieldError{Field: path, Err: fmt.Errorf(format, args...)}
}

// NotNegative returns a FieldError for field when v is negative, else nil,
// so that a Validate lists such checks in one append (errors.Join drops the
// nils): errs = append(errs, config.NotNegative("window", c.Window), ...).
func NotNegative[T cmp.Ordered](field string, v T) error {
	var zero T
	if v < zero {
		return Field(field, "must not be negative")
	}
	return nil
}

// In prefixes the field path of every FieldError inside err with prefix, so a
// nested struct's Validate can be reused by its parent:
// config.In("limits", l.Validate()).
func In(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range flatten(err) {
		var fe *FieldError
		if errors.As(e, &fe) {
			c := *fe
			switch {
			case c.Field == "":
				c.Field = prefix
			case strings.HasPrefix(c.Field, "["):
				c.Field = prefix + c.Field
			default:
				c.Field = prefix + "." + c.Field
			}
			out = append(out, &c)
			continue
		}
		out = append(out, &FieldError{Field: prefix, Err: e})
	}
	return errors.Join(out...)
}

// Fields lists the field paths named by the FieldErrors in err (joined
// errors included), in order; nil when there are none. Tests and tools use
// it to check which fields a Validate refused.
func Fields(err error) []string {
	var out []string
	for _, e := range flatten(err) {
		var fe *FieldError
		if e != nil && errors.As(e, &fe) {
			out = append(out, fe.Field)
		}
	}
	return out
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(":")
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *FieldError) Unwrap() error { return e.Err }

// ParseError is a syntax or decoding error (a wrong type, an unknown or
// duplicate field). Its message has the house form "file:line: field: why";
// Line and Field are filled in when the decoder names a line (a type error
// names the field written there). A file with several type errors gives one
// ParseError each, joined.
type ParseError struct {
	File  string
	Line  int
	Field string
	Err   error
}

func (e *ParseError) Error() string {
	return (&FieldError{File: e.File, Line: e.Line, Field: e.Field, Err: e.Err}).Error()
}
func (e *ParseError) Unwrap() error { return e.Err }

// Load reads the file at path and parses it into v (a pointer to a struct).
func Load(path string, v any) error {
	data, err := ReadFile(path)
	if err != nil {
		return err
	}
	return Parse(data, path, v)
}

// ReadFile reads the file at path, refusing one larger than MaxFileSize
// with a *ParseError.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, &ParseError{File: path, Err: fmt.Errorf("file larger than %d bytes", MaxFileSize)}
	}
	return data, nil
}

// Parse decodes YAML or JSON data (JSON is read as YAML) into v, rejecting
// unknown fields and duplicate keys, then runs v's Validate if it has one.
// name is used in error messages (usually the file path). Empty input leaves
// v unchanged and only validates it.
func Parse(data []byte, name string, v any) error {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	err := dec.Decode(&root)
	switch {
	case errors.Is(err, io.EOF):
		// empty document: zero value
	case err != nil:
		return decodeError(err, name, &root)
	default:
		var extra yaml.Node
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			return &ParseError{File: name, Err: errors.New("more than one YAML document")}
		}
		strict := yaml.NewDecoder(bytes.NewReader(data))
		strict.KnownFields(true)
		if err := strict.Decode(v); err != nil {
			return decodeError(err, name, &root)
		}
	}
	val, ok := v.(Validator)
	if !ok {
		return nil
	}
	return annotate(val.Validate(), name, &root)
}

// Locate fills File (name) and Line of the FieldErrors in err from the YAML
// or JSON document data, as Parse does for Validate's errors. It serves
// errors found after parsing, such as a reload that Apply refused. A data
// that does not parse leaves lines at 0.
func Locate(err error, name string, data []byte) error {
	if err == nil {
		return nil
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		root = yaml.Node{}
	}
	return annotate(err, name, &root)
}

// annotate fills File and Line of the FieldErrors in err.
func annotate(err error, file string, root *yaml.Node) error {
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range flatten(err) {
		var fe *FieldError
		if !errors.As(e, &fe) {
			out = append(out, &FieldError{File: file, Err: e})
			continue
		}
		c := *fe
		c.File = file
		if c.Line == 0 {
			c.Line = lineOf(root, c.Field)
		}
		out = append(out, &c)
	}
	return errors.Join(out...)
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// lineOf finds the line of the node at path ("a.b[2].c"); it returns the
// line of the deepest ancestor found, or 0.
func lineOf(root *yaml.Node, path string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, seg := range splitPath(path) {
		next, keyLine := child(n, seg)
		if next == nil {
			if keyLine > 0 {
				return keyLine
			}
			return line
		}
		if keyLine > 0 {
			line = keyLine
		} else {
			line = next.Line
		}
		n = next
	}
	return line
}

func splitPath(path string) []string {
	var segs []string
	for _, part := range strings.Split(path, ".") {
		for part != "" {
			i := strings.IndexByte(part, '[')
			if i < 0 {
				segs = append(segs, part)
				break
			}
			if i > 0 {
				segs = append(segs, part[:i])
			}
			j := strings.IndexByte(part[i:], ']')
			if j < 0 {
				segs = append(segs, part[i:])
				break
			}
			segs = append(segs, part[i:i+j+1])
			part = part[i+j+1:]
		}
	}
	return segs
}

// child returns the node under seg ("key" or "[n]") and the line of its key.
func child(n *yaml.Node, seg string) (*yaml.Node, int) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if strings.HasPrefix(seg, "[") && strings.HasSuffix(seg, "]") {
		i, err := strconv.Atoi(seg[1 : len(seg)-1])
		if err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
			return nil, 0
		}
		return n.Content[i], 0
	}
	if n.Kind != yaml.MappingNode {
		return nil, 0
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == seg {
			return n.Content[i+1], n.Content[i].Line
		}
	}
	return nil, 0
}
