//go:build !unix

package shed

// waitPoll has no descriptor to wait on where the network poller does not
// watch pipes: pollYield falls back to runtime.Gosched.
func waitPoll() bool { return false }
