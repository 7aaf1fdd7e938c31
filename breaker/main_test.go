package breaker

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// must returns v, panicking on err: for constructors whose config the test
// knows to be valid (the invalid ones are tested in config_test.go).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
