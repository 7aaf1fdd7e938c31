//go:build !unix

package h1

import "time"

// cpuTime: no getrusage here, so BenchmarkConnLayer's cpu-ns/op reads 0.
func cpuTime() time.Duration { return 0 }
