package up

import "syscall"

// childAttr: the child dies with us even if we are SIGKILLed (Pdeathsig);
// its own process group, so that a terminal's Ctrl-C reaches only us and
// we stop it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
