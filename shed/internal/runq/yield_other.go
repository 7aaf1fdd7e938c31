//go:build !unix

package runq

// waitPoll has no descriptor to wait on where the network poller does not
// watch pipes: Yield falls back to runtime.Gosched.
func waitPoll() bool { return false }
