//go:build !unix

package lmtest

import "errors"

// fullBacklog needs a listener whose backlog the kernel honours at 0 and
// raw sockets to build it: unix only.
func (b *Blackhole) fullBacklog() error {
	return errors.New("lmtest: a SYN-dropping blackhole needs a unix kernel; use NewBlackhole(true)")
}
