//go:build !linux

package etcdtest

import "syscall"

// dieWithParent: without Linux's Pdeathsig, etcd outlives a killed test
// binary (Cleanup still stops it).
func dieWithParent() *syscall.SysProcAttr { return nil }
