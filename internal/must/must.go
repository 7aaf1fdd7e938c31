// Package must unwraps the (value, error) of a constructor in tests and
// examples whose input is known to be valid, so that a test reads
// must.Get(breaker.New(cfg, opts)). The error cases have tests of their own.
package must

// Get returns v, and panics with err when err is not nil: a constructor
// refusing input that the test believes valid is a bug in the test.
func Get[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
