package test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the scenarios when a goroutine they started (a server, a
// client's connection, a watcher) outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
