// Package layers records the import layers of ARCHITECTURE.md and its test
// enforces them: imports only point down, packages of one layer do not
// import each other, and the vocabulary packages use the standard library
// only. A sub-package (shed/shedgrpc) sits in its parent's layer and may
// import its parent; the parent never imports it, so that users of the parent
// do not pay for the sub-package's dependencies.
//
// A new package must be added to Table; the test fails until it is.
package layers

// Table maps a package path, relative to the module root, to its layer.
// Sub-packages not listed take the layer of their nearest listed ancestor.
var Table = map[string]int{
	// L0 vocabulary
	"clock":            0,
	"outcome":          0,
	"tier":             0,
	"obs":              0,
	"internal/version": 0,
	"internal/layers":  0,
	// L1 shared infrastructure
	"config": 1,
	"store":  1,
	// L2 algorithms (ARCHITECTURE.md's L1)
	"failover": 2,
	"lastmile": 2,
	"shed":     2,
	"limit":    2,
	"breaker":  2,
	"retry":    2,
	"cache":    2,
	"routing":  2,
	// L3 services
	"gateway": 3,
	"control": 3,
	// L4 wiring
	"sim":      4,
	"cmd/veer": 4,
	"test":     4,
	"internal": 4, // test helpers and wiring under internal/ not listed above
}

// StdlibOnly lists packages that may import nothing outside the standard
// library (sub-packages excepted).
var StdlibOnly = []string{"clock", "outcome", "tier"}
