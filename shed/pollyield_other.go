//go:build !unix

package shed

import (
	"errors"
	"os"
)

// newWakePipe fails where pipes are not watched by the network poller; the
// gate then falls back to runtime.Gosched.
func newWakePipe() (r, w *os.File, err error) {
	return nil, nil, errors.New("no pollable pipe on this platform")
}
