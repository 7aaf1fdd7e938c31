// Package version reports the build's version, commit and Go version.
// Version and Commit are set at link time:
//
//	go build -ldflags "-X github.com/veerhq/veer/internal/version.Version=v0.1.0"
//
// When they are not, the module and VCS information recorded by the Go
// toolchain are used.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by -ldflags -X.
var (
	Version = ""
	Commit  = ""
)

// Info describes this build.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"go"`
}

// Get returns the build information.
func Get() Info {
	i := Info{Version: Version, Commit: Commit, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && i.Commit == "" {
				i.Commit = s.Value
			}
		}
	}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}

func (i Info) String() string {
	return fmt.Sprintf("veer %s (commit %s, %s)", i.Version, i.Commit, i.Go)
}
