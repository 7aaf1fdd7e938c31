//go:build unix && !linux

package up

import "syscall"

// childAttr: its own process group, so that a terminal's Ctrl-C reaches
// only us and we stop it. Without Linux's Pdeathsig a SIGKILLed veer up
// leaves its children running (veer up is built for Linux: doc.go).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
