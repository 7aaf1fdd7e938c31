package layers

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/veerhq/veer"

// layerOf returns the layer of pkg (module-relative) and the listed
// ancestor that gave it.
func layerOf(pkg string) (int, string, bool) {
	for p := pkg; ; {
		if l, ok := Table[p]; ok {
			return l, p, true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return 0, "", false
		}
		p = p[:i]
	}
}

// imports returns, for each package directory of the module, the imports of
// its non-test files.
func imports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // nested module (bench/)
				}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !slices.Contains(out[rel], p) {
				out[rel] = append(out[rel], p)
			}
		}
		if _, ok := out[rel]; !ok {
			out[rel] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// check returns the layering violations of the import graph.
func check(graph map[string][]string) []string {
	var bad []string
	for pkg, imps := range graph {
		if pkg == "." {
			continue
		}
		l, owner, ok := layerOf(pkg)
		if !ok {
			bad = append(bad, pkg+": not in layers.Table; add it to internal/layers/layers.go")
			continue
		}
		for _, imp := range imps {
			if slices.Contains(StdlibOnly, pkg) && !strings.HasPrefix(imp, module+"/") && strings.Contains(strings.Split(imp, "/")[0], ".") {
				bad = append(bad, pkg+" imports "+imp+": vocabulary packages use the standard library only")
			}
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			dl, downer, ok := layerOf(dep)
			switch {
			case !ok:
				bad = append(bad, pkg+" imports "+dep+", which is not in layers.Table")
			case strings.HasPrefix(pkg, dep+"/"):
				// a sub-package may import its ancestors
			case owner == downer && owner != "internal":
				if strings.HasPrefix(dep, pkg+"/") {
					bad = append(bad, pkg+" imports its sub-package "+dep+": sub-packages hold heavy adapters the parent must not pull in")
				}
			case dl > l:
				bad = append(bad, pkg+" (layer "+strconv.Itoa(l)+") imports "+dep+" (layer "+strconv.Itoa(dl)+"): imports must point down")
			case dl == l && l < 4:
				bad = append(bad, pkg+" imports "+dep+": packages of one layer (layer "+strconv.Itoa(l)+") must not import each other")
			}
		}
	}
	slices.Sort(bad)
	return bad
}

func TestModuleRespectsLayers(t *testing.T) {
	graph := imports(t, "../..")
	if len(graph) < 5 {
		t.Fatalf("found only %d packages; is the walk rooted at the module?", len(graph))
	}
	for _, b := range check(graph) {
		t.Error(b)
	}
}

func TestCheckCatchesViolations(t *testing.T) {
	tests := []struct {
		name  string
		graph map[string][]string
		want  int
	}{
		{"down is fine", map[string][]string{"shed": {module + "/outcome", module + "/config"}}, 0},
		{"up is not", map[string][]string{"outcome": {module + "/shed"}}, 1},
		{"same layer is not", map[string][]string{"shed": {module + "/limit"}}, 1},
		{"sub-package may import parent", map[string][]string{"shed/shedgrpc": {module + "/shed"}}, 0},
		{"parent may not import sub-package", map[string][]string{"shed": {module + "/shed/shedgrpc"}}, 1},
		{"vocabulary stays stdlib", map[string][]string{"clock": {"github.com/x/y"}}, 1},
		{"unknown package", map[string][]string{"frobnicate": nil}, 1},
		{"wiring may import anything, sim included", map[string][]string{"cmd/veer": {module + "/sim", module + "/shed"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := check(tt.graph); len(got) != tt.want {
				t.Errorf("check() = %q, want %d violations", got, tt.want)
			}
		})
	}
}
