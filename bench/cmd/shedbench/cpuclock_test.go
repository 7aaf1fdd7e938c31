package main

import (
	"crypto/sha256"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// burn spins this thread for at least d of CPU time (RUSAGE_THREAD).
func burn(t *testing.T, d time.Duration) {
	t.Helper()
	var ru syscall.Rusage
	cpu := func() time.Duration {
		if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	h := sha256.Sum256(nil)
	for start := cpu(); cpu()-start < d; {
		for range 1000 {
			h = sha256.Sum256(h[:])
		}
	}
}

// threadsCPU reads this process's own CPU time at nanosecond resolution:
// a 30 ms burn shows as 30 ms give or take what the test's other threads
// ran meanwhile, where /proc/<pid>/stat moves in steps of 10 ms, and it
// agrees with the kernel's rusage of the whole process.
func TestThreadsCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Fatalf("no /proc/self/task: %v (the bench needs Linux /proc)", err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid := os.Getpid()
	a, ok := threadsCPU(pid)
	if !ok {
		t.Fatal("threadsCPU: schedstat unreadable")
	}
	burn(t, 30*time.Millisecond)
	b, _ := threadsCPU(pid)
	if d := b - a; d < 30*time.Millisecond || d > 60*time.Millisecond {
		t.Fatalf("a 30 ms burn read as %v", d)
	}
	if (b-a)%(10*time.Millisecond) == 0 {
		t.Fatalf("a 30 ms burn read as %v: whole ticks, not ns", b-a)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	c, _ := threadsCPU(pid)
	self := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	// rusage includes threads that ended; schedstat only the live ones.
	if c < self-20*time.Millisecond || c > self+20*time.Millisecond {
		t.Fatalf("threadsCPU %v, rusage %v", c, self)
	}
}
