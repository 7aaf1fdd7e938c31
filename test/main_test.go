package test

import (
	"os"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the scenarios when a goroutine they started (a server, a
// client's connection, a watcher) outlives them, and removes the veer
// binary buildVeer built (75 MB a run, left in the temp dir before).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(removeBuilt{m})
}

// builtDir is the directory buildVeer built the binary in, if it did.
var builtDir atomic.Pointer[string]

type removeBuilt struct{ m *testing.M }

func (r removeBuilt) Run() int {
	code := r.m.Run()
	if dir := builtDir.Load(); dir != nil {
		if err := os.RemoveAll(*dir); err != nil {
			println("test: removing the built veer:", err.Error())
		}
	}
	return code
}
