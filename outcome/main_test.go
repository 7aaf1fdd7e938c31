package outcome_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started (a
// server, a connection's reader) outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
