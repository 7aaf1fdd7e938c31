//go:build unix

package shed

import "os"

// newWakePipe returns a pipe whose read end the runtime's network poller
// watches (os.Pipe sets both ends non-blocking on Unix).
func newWakePipe() (r, w *os.File, err error) { return os.Pipe() }
