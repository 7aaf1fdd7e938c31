package sim

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

//go:embed scenarios/*.yaml
var bundledScenarios embed.FS

// Bundled returns the names of the bundled scenarios, "default" first.
func Bundled() []string {
	entries, _ := fs.ReadDir(bundledScenarios, "scenarios")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.SortFunc(names, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == "default":
			return -1
		case b == "default":
			return 1
		}
		return strings.Compare(a, b)
	})
	return names
}

// LoadBundled parses the bundled scenario called name.
func LoadBundled(name string) (*Scenario, error) {
	data, err := bundledScenarios.ReadFile(path.Join("scenarios", name+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("%w %q (bundled: %s)", ErrUnknownScenario, name, strings.Join(Bundled(), ", "))
	}
	return ParseScenario(data, name+".yaml")
}

// BundledSource returns the YAML text of a bundled scenario.
func BundledSource(name string) ([]byte, error) {
	data, err := bundledScenarios.ReadFile(path.Join("scenarios", name+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownScenario, name)
	}
	return data, nil
}

// Load returns the scenario named by ref: a bundled name, or a file path
// (anything containing a path separator or ending in .yaml, .yml or .json).
// The second result is the file path ("" for a bundled scenario), which Run
// needs to resolve trace files.
func Load(ref string) (*Scenario, string, error) {
	if !strings.ContainsAny(ref, `/\`) && !strings.HasSuffix(ref, ".yaml") &&
		!strings.HasSuffix(ref, ".yml") && !strings.HasSuffix(ref, ".json") {
		s, err := LoadBundled(ref)
		return s, "", err
	}
	data, err := os.ReadFile(ref)
	if err != nil {
		return nil, "", err
	}
	s, err := ParseScenario(data, ref)
	return s, ref, err
}
