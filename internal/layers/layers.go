// Package layers records the import layers of ARCHITECTURE.md and its test
// enforces them: imports only point down, packages of one layer do not
// import each other, and the vocabulary packages use the standard library
// only. A sub-package (shed/shedgrpc) sits in its parent's layer and may
// import its parent; the parent never imports it, so that users of the parent
// do not pay for the sub-package's dependencies. A sub-package listed in
// Table is a package of its own layer (shed/internal/runq sits below shed,
// which imports it). The numbers are docs/architecture.md's; that page maps
// them onto the workspace guide's L0..L3.
//
// A new package must be added to Table; the test fails until it is.
//
// It also records which heavy third-party dependencies each library package
// (layers 0 to 3, sub-packages included) may pull in, directly or through
// another package: HeavyAllowed is an explicit allow-list, so that a new
// fsnotify, Prometheus, gRPC, Redis, QUIC, DNS, etcd, bbolt or NATS in a
// library's `go list -deps` is a conscious edit here, not an accident of an
// import. Wiring (layer 4) may pull anything.
package layers

// Table maps a package path, relative to the module root, to its layer.
// Sub-packages not listed take the layer of their nearest listed ancestor.
var Table = map[string]int{
	// L0 vocabulary
	"clock":               0,
	"outcome":             0,
	"tier":                0,
	"obs":                 0,
	"internal/version":    0,
	"internal/layers":     0,
	"internal/rolling":    0, // the rolling window of breaker and retry
	"internal/atomicfile": 0, // durable file replacement for failover and lastmile
	"internal/listenpair": 0, // TCP and UDP on one port: control, the DNS server, test servers
	"internal/gcfloor":    0, // the gateway process's GC heap floor
	"routing/schedule":    0, // the scheduling API's wire schema, client (lastmile) and server (control)
	"internal/selfsigned": 1, // the self-signed certificate of the gateway and the control plane
	"internal/localca":    1, // the local CA of `veer up` (issue 27)
	// L1 shared infrastructure
	"config":             1,
	"store":              1,
	"shed/internal/runq": 1, // shed's run-queue engine: below shed, which imports it
	// the gateway's HTTP/1 wire engine: below gateway, which imports it
	"gateway/internal/h1": 1,
	// L2 algorithms (ARCHITECTURE.md's L1)
	"failover": 2,
	"lastmile": 2,
	"shed":     2,
	"limit":    2,
	"breaker":  2,
	"retry":    2,
	"cache":    2,
	"routing":  2,
	"release":  2,
	"slo":      2,
	// document schemas the services share (they import config)
	"store/docs": 2,
	"async":      2, // the durable invocation queue's core; its NATS code in async/asyncnats
	// L3 services
	"gateway":   3,
	"control":   3,
	"dnsserver": 3,
	// L4 wiring
	"sim":      4,
	"up":       4, // veer up and veer chaos: the whole system on one machine
	"cmd/veer": 4,
	"test":     4,
	"internal": 4, // test helpers and wiring under internal/ not listed above
}

// StdlibOnly lists packages that may import nothing outside the standard
// library (sub-packages excepted).
var StdlibOnly = []string{"clock", "outcome", "tier", "internal/rolling", "internal/atomicfile", "internal/listenpair", "internal/gcfloor", "routing/schedule", "gateway/internal/h1"}

// Heavy names the third-party dependencies a library user should not pay for
// unless the library needs them, by module path prefix.
var Heavy = map[string]string{
	"fsnotify":   "github.com/fsnotify/fsnotify",
	"prometheus": "github.com/prometheus/client_golang",
	"grpc":       "google.golang.org/grpc",
	"go-redis":   "github.com/redis/go-redis",
	"quic-go":    "github.com/quic-go/quic-go",
	"miekg/dns":  "github.com/miekg/dns",
	"etcd":       "go.etcd.io/etcd",
	"bbolt":      "go.etcd.io/bbolt",
	"nats":       "github.com/nats-io",
	"otel":       "go.opentelemetry.io/otel",
}

// HeavyAllowed lists, per library package (module-relative path, not
// inherited by sub-packages), the Heavy dependencies its non-test build may
// pull in. A package not listed may pull none. The test also fails on an
// entry the package no longer needs, so the list stays true.
var HeavyAllowed = map[string][]string{
	"obs":                        {"prometheus"},             // the registry and /metrics
	"outcome/outcomegrpc":        {"grpc"},                   // gRPC status codes
	"tier/tiergrpc":              {"grpc"},                   // gRPC metadata
	"config/watch":               {"fsnotify", "prometheus"}, // the file watcher and its reload counter
	"failover":                   {"prometheus"},
	"lastmile":                   {"prometheus", "quic-go", "miekg/dns"}, // HTTP/3 and DNS are its subject
	"lastmile/lmtest":            {"quic-go", "miekg/dns"},
	"shed":                       {"prometheus"},
	"shed/internal/runq":         {"prometheus"}, // the yields' collector
	"shed/shedgrpc":              {"grpc", "prometheus"},
	"limit":                      {"prometheus"},
	"limit/limitgrpc":            {"grpc", "prometheus"},
	"limit/limitredis":           {"go-redis", "prometheus"},
	"limit/limittest":            {"prometheus"},
	"breaker":                    {"prometheus"},
	"retry":                      {"prometheus"},
	"cache":                      {"prometheus"},
	"cache/cacheredis":           {"go-redis"},
	"dnsserver":                  {"prometheus", "miekg/dns"},             // DNS is its subject
	"dnsserver/doh":              {"prometheus", "miekg/dns", "quic-go"},  // DoH over HTTP/3
	"dnsserver/dnsfile":          {"prometheus", "miekg/dns", "fsnotify"}, // the watched data file
	"dnsserver/dnsstore":         {"prometheus", "miekg/dns"},             // the control-plane store source
	"dnsserver/internal/dnstest": {"quic-go", "miekg/dns"},                // test certificates from lastmile/lmtest
	"store/storebolt":            {"bbolt"},
	"store/storeetcd":            {"etcd", "grpc"},
	"store/storeetcd/etcdtest":   {"etcd", "grpc"},
	// the control plane is a service: HTTP/3 for its public API, both store
	// backends, metrics
	"control":              {"prometheus", "quic-go", "bbolt", "etcd", "grpc"},
	"control/controltest":  {"prometheus", "quic-go", "bbolt", "etcd", "grpc"}, // fixtures over control
	"gateway":              {"prometheus"},                                     // metrics per route, cluster, backend
	"gateway/gatewayh3":    {"prometheus", "quic-go"},                          // HTTP/3 listener
	"gateway/gatewayredis": {"prometheus", "go-redis"},                         // limits shared through Redis
	"gateway/gatewaytest":  {"prometheus"},                                     // tests' gateway: a fresh registry each
	"gateway/gatewayotel":  {"otel", "prometheus", "grpc"},                     // OTLP span export; otlptracehttp links gRPC status types, package gateway prometheus
	"async":                {"prometheus"},                                     // queue metrics
	"async/asyncnats":      {"prometheus", "nats"},                             // JetStream, embedded or external
	"gateway/gatewayasync": {"prometheus", "nats"},                             // wires asyncnats into the gateway
	"control/console":      {"prometheus"},                                     // the web console (through obs); reads gateways' metrics text
}
