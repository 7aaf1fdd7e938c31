package config_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/config"
)

type endpoint struct {
	Name   string        `yaml:"name" json:"name"`
	Target time.Duration `yaml:"target" json:"target"`
}

type testConfig struct {
	Listen    string     `yaml:"listen" json:"listen"`
	Endpoints []endpoint `yaml:"endpoints" json:"endpoints"`
	Limits    struct {
		Rate int `yaml:"rate" json:"rate"`
	} `yaml:"limits" json:"limits"`
}

func (c *testConfig) Validate() error {
	var errs []error
	for i, e := range c.Endpoints {
		if e.Target < 0 {
			errs = append(errs, config.Field("endpoints["+itoa(i)+"].target", "must not be negative, got %v", e.Target))
		}
	}
	errs = append(errs, config.In("limits", c.validateLimits()))
	return errors.Join(errs...)
}

func (c *testConfig) validateLimits() error {
	if c.Limits.Rate < 0 {
		return config.Field("rate", "must not be negative")
	}
	return nil
}

func itoa(i int) string { return string(rune('0' + i)) }

const good = `listen: ":8080"
endpoints:
  - name: a
    target: 5ms
  - name: b
    target: 10ms
limits:
  rate: 100
`

func TestParseGood(t *testing.T) {
	var c testConfig
	if err := config.Parse([]byte(good), "good.yaml", &c); err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":8080" || len(c.Endpoints) != 2 || c.Endpoints[1].Target != 10*time.Millisecond || c.Limits.Rate != 100 {
		t.Fatalf("decoded %+v", c)
	}
}

func TestParseJSON(t *testing.T) {
	var c testConfig
	err := config.Parse([]byte(`{"listen": ":1", "endpoints": [{"name": "x", "target": "1s"}]}`), "c.json", &c)
	if err != nil || c.Endpoints[0].Target != time.Second {
		t.Fatalf("JSON: %+v, %v", c, err)
	}
}

func TestParseErrorsNameFieldAndLine(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // substrings of the error
	}{
		{"unknown field", "listen: x\nendpoints:\n  - name: a\n    tagret: 5ms\n", []string{"bad.yaml:4: endpoints[0].tagret: unknown field"}},
		{"wrong type", "limits:\n  rate: lots\n", []string{`bad.yaml:2: limits.rate: want an integer, got "lots"`}},
		{"duration in words", "endpoints:\n  - name: a\n  - name: b\n    target: 2 seconds\n", []string{`bad.yaml:4: endpoints[1].target: want a duration such as "2s" or "500ms", got "2 seconds"`}},
		{"mapping for a string", "listen:\n  a: b\n", []string{"bad.yaml:2: listen: want a string, got !!map"}},
		{"list in flow form", "endpoints: [{name: a, target: 1ms}, {name: b, target: soon}]\n", []string{`bad.yaml:1: endpoints[1].target: want a duration such as "2s" or "500ms", got "soon"`}},
		{"two type errors", "listen: [1]\nlimits:\n  rate: x\n", []string{"bad.yaml:1: listen: want a string, got !!seq", `bad.yaml:3: limits.rate: want an integer, got "x"`}},
		{"validation in list", "endpoints:\n  - name: a\n    target: 1ms\n  - name: b\n    target: -3ms\n", []string{"bad.yaml:5: endpoints[1].target: must not be negative"}},
		{"validation in nested struct", "listen: x\n\nlimits:\n  rate: -1\n", []string{"bad.yaml:4: limits.rate: must not be negative"}},
		{"two documents", "listen: a\n---\nlisten: b\n", []string{"bad.yaml: more than one YAML document"}},
		{"syntax", "listen: [\n", []string{"bad.yaml:1: did not find expected node content"}},
		{"syntax in flow", "listen: [a b\n", []string{"bad.yaml:1: did not find expected ','"}},
		{"syntax later", "listen: a\nlimits:\n  rate: 1\n   x: y\n", []string{"bad.yaml:4: "}},
		{"duplicate key", "listen: a\nlisten: b\n", []string{"bad.yaml:2: listen: written twice (first at line 1)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c testConfig
			err := config.Parse([]byte(tt.in), "bad.yaml", &c)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if decoderForm.MatchString(err.Error()) {
				t.Errorf("error %q keeps the decoder's own form", err)
			}
			var pe *config.ParseError
			if !strings.HasPrefix(tt.name, "validation") && !errors.As(err, &pe) {
				t.Errorf("error %q is not a *ParseError", err)
			}
		})
	}
}

// decoderForm matches the YAML decoder's own error form ("yaml: line 4:",
// "unmarshal errors:"), which Parse must not pass through.
var decoderForm = regexp.MustCompile(`(^|[^.])yaml: |unmarshal errors|(^|[^t] )line [0-9]+:`)

func TestFieldErrorIsMatchable(t *testing.T) {
	var c testConfig
	err := config.Parse([]byte("limits:\n  rate: -1\n"), "x.yaml", &c)
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Field != "limits.rate" || fe.Line != 2 || fe.File != "x.yaml" {
		t.Fatalf("FieldError = %+v from %v", fe, err)
	}
}

func TestEmptyIsZeroValue(t *testing.T) {
	var c testConfig
	if err := config.Parse(nil, "empty.yaml", &c); err != nil {
		t.Fatal(err)
	}
	if c.Listen != "" || c.Endpoints != nil {
		t.Fatalf("empty input changed the config: %+v", c)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`{"listen": ":1"}`))
	f.Add([]byte("endpoints:\n  - target: -1s\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c testConfig
		err := config.Parse(data, "fuzz.yaml", &c)
		if err == nil {
			// Whatever parsed must validate.
			if verr := c.Validate(); verr != nil {
				t.Fatalf("Parse accepted a config that fails Validate: %v", verr)
			}
		}
		// Locate reads the same untrusted bytes: it must not panic and
		// must keep the field it was given.
		lerr := config.Locate(config.Field("endpoints[0].target", "x"), "fuzz.yaml", data)
		if got := config.Fields(lerr); len(got) != 1 || got[0] != "endpoints[0].target" {
			t.Fatalf("Locate lost the field: %v", lerr)
		}
	})
}

func TestFields(t *testing.T) {
	err := errors.Join(config.Field("a", "x"), config.In("b", errors.Join(config.Field("c", "y"), errors.New("plain"))))
	if got := strings.Join(config.Fields(err), ","); got != "a,b.c,b" {
		t.Fatalf("Fields = %q, want a,b.c,b", got)
	}
	if got := config.Fields(nil); got != nil {
		t.Fatalf("Fields(nil) = %v", got)
	}
}

func TestNotNegative(t *testing.T) {
	if err := config.NotNegative("window", -time.Second); err == nil || err.Error() != "window: must not be negative" {
		t.Fatalf("NotNegative(-1s) = %v", err)
	}
	if err := config.NotNegative("window", 0*time.Second); err != nil {
		t.Fatalf("NotNegative(0) = %#v, want a nil error", err)
	}
	if err := config.NotNegative("ratio", 0.5); err != nil {
		t.Fatalf("NotNegative(0.5) = %#v, want a nil error", err)
	}
	if got := config.Fields(errors.Join(config.NotNegative("a", 1), config.NotNegative("b", -1))); len(got) != 1 || got[0] != "b" {
		t.Fatalf("joined = %v, want [b]", got)
	}
}
