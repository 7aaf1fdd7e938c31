package must

import (
	"errors"
	"testing"
)

func TestGet(t *testing.T) {
	if got := Get(42, nil); got != 42 {
		t.Fatalf("Get = %v", got)
	}
	errBad := errors.New("bad")
	defer func() {
		if r := recover(); r != errBad {
			t.Fatalf("recovered %v, want the error", r)
		}
	}()
	Get(0, errBad)
	t.Fatal("Get did not panic on an error")
}
