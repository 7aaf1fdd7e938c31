package control_test

import (
	"strings"
	"testing"

	"github.com/veerhq/veer/control"
)

// FuzzBearerToken: a token read is non-empty and free of spaces and
// control characters, and reads back the same under any case of the
// scheme and any number of spaces after it.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer abc", "BEARER  abc", "Basic abc", "Bearer", "Bearer ", "Bearerabc", "Bearer a b", "Bearer \x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := control.BearerToken(h)
		if !ok {
			if tok != "" {
				t.Fatalf("%q: token %q with ok=false", h, tok)
			}
			return
		}
		if tok == "" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			t.Fatalf("%q: token %q", h, tok)
		}
		for _, scheme := range []string{"Bearer ", "bearer ", "BEARER   "} {
			if again, ok := control.BearerToken(scheme + tok); !ok || again != tok {
				t.Fatalf("%q: %q reads back as %q %v", h, scheme+tok, again, ok)
			}
		}
	})
}

// FuzzParsePreconditions: at most one condition, and a version is one a
// document can have.
func FuzzParsePreconditions(f *testing.F) {
	for _, s := range [][2]string{{"*", ""}, {"", "*"}, {`"3"`, ""}, {"*", "*"}, {"", `"1"`}, {"W/\"2\"", ""}, {"-1", ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ifMatch, ifNone string) {
		p, err := control.ParsePreconditions(ifMatch, ifNone)
		if err != nil {
			if p != (control.Precondition{}) {
				t.Fatalf("%q %q: %+v with %v", ifMatch, ifNone, p, err)
			}
			return
		}
		n := 0
		for _, b := range []bool{p.Version != 0, p.Exists, p.Absent} {
			if b {
				n++
			}
		}
		if n > 1 || p.Version < 0 {
			t.Fatalf("%q %q: %+v", ifMatch, ifNone, p)
		}
		if p.Absent != (strings.TrimSpace(ifNone) == "*") {
			t.Fatalf("%q %q: %+v", ifMatch, ifNone, p)
		}
	})
}

// FuzzDocumentError: whatever the body, a refused document's error is in
// the house form: every line starts with the key and names no decoder.
func FuzzDocumentError(f *testing.F) {
	for _, s := range []string{
		"sites: [{name: a, clusterz: []}]", `{"regionz": 1}`, "ttl_seconds: x", "a: b: c", "{", "[1]",
		"default_domain: a\ndefault_domain: b", "rules:\n  - {name: r, bucket: {from: x}}", "\t", "--- 1\n--- 2",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := control.ValidateDocument(control.KeyTable, b)
		if err == nil {
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.HasPrefix(line, control.KeyTable+":") {
				t.Fatalf("%q: %q does not start with the key", b, line)
			}
			if strings.Contains(line, "yaml:") || strings.Contains(line, "unmarshal errors") {
				t.Fatalf("%q: %q names the decoder", b, line)
			}
		}
	})
}
