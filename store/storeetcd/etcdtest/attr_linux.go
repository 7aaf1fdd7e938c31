package etcdtest

import "syscall"

// dieWithParent: etcd is SIGKILLed when the test binary dies.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
