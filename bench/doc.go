// Package bench is a nested module holding load generators and side-by-side
// comparisons of veer against its peers, so that veer's own module never
// depends on what it is compared with. Each comparison lives in its own
// sub-package (bench/shed, bench/guard) with a command under bench/cmd.
package bench
