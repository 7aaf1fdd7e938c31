package layers

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// deps returns, for each package of the module (module-relative path), the
// transitive dependencies of its non-test build, from `go list -deps`.
func deps(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	graph := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		graph[pkg] = f[1:]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return graph
}

// heavyOf returns the names (keys of Heavy) of the heavy dependencies in
// pkgDeps, sorted.
func heavyOf(pkgDeps []string) []string {
	var out []string
	for name, prefix := range Heavy {
		for _, d := range pkgDeps {
			if d == prefix || strings.HasPrefix(d, prefix+"/") {
				out = append(out, name)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkHeavy returns the packages of layers 0 to 3 whose heavy dependencies
// differ from HeavyAllowed: one they did not ask for, or an allowed one
// they no longer pull.
func checkHeavy(graph map[string][]string, allowed map[string][]string) []string {
	var bad []string
	for pkg, d := range graph {
		l, _, ok := layerOf(pkg)
		if pkg == "" || !ok || l >= 4 {
			continue // the module root; unknown (TestModuleRespectsLayers says so); wiring
		}
		got := heavyOf(d)
		for _, h := range got {
			if !slices.Contains(allowed[pkg], h) {
				bad = append(bad, pkg+" pulls in "+h+" ("+Heavy[h]+"), which HeavyAllowed does not allow it: move the import to a sub-package, or allow it in internal/layers/layers.go if the package's purpose needs it")
			}
		}
		for _, h := range allowed[pkg] {
			if !slices.Contains(got, h) {
				bad = append(bad, pkg+" no longer pulls in "+h+": remove it from HeavyAllowed in internal/layers/layers.go")
			}
		}
	}
	for pkg := range allowed {
		if _, ok := graph[pkg]; !ok {
			bad = append(bad, "HeavyAllowed lists "+pkg+", which is not a package of the module")
		}
	}
	slices.Sort(bad)
	return bad
}

func TestLibrariesPullOnlyAllowedHeavyDeps(t *testing.T) {
	graph := deps(t)
	if len(graph) < 5 {
		t.Fatalf("go list found only %d packages", len(graph))
	}
	for _, b := range checkHeavy(graph, HeavyAllowed) {
		t.Error(b)
	}
}

func TestCheckHeavyCatchesUnaskedDeps(t *testing.T) {
	const fsn = "github.com/fsnotify/fsnotify"
	const prom = "github.com/prometheus/client_golang/prometheus"
	tests := []struct {
		name    string
		graph   map[string][]string
		allowed map[string][]string
		want    int
	}{
		{"allowed", map[string][]string{"shed": {prom, "fmt"}}, map[string][]string{"shed": {"prometheus"}}, 0},
		{"not asked for", map[string][]string{"config": {fsn}}, nil, 1},
		{"through a sub-package of its own", map[string][]string{"shed": {prom, fsn}}, map[string][]string{"shed": {"prometheus"}}, 1},
		{"allow-list is not inherited", map[string][]string{"shed": {prom}, "shed/shedgrpc": {prom}}, map[string][]string{"shed": {"prometheus"}}, 1},
		{"stale entry", map[string][]string{"shed": {"fmt"}}, map[string][]string{"shed": {"prometheus"}}, 1},
		{"unknown package in the list", map[string][]string{"shed": nil}, map[string][]string{"shedx": nil}, 1},
		{"wiring may pull anything", map[string][]string{"cmd/veer": {fsn, prom}}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkHeavy(tt.graph, tt.allowed); len(got) != tt.want {
				t.Errorf("checkHeavy() = %q, want %d problems", got, tt.want)
			}
		})
	}
}
