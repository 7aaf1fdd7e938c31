package h1

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the listener's and the client's goroutines end with
// the tests that started them (http.Transport's, of the fallback, idle).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
