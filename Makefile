# veer: build, test and measure. `make test` is what CI runs.
SHELL := /bin/bash
GO ?= go
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
PKGS := ./...
FUZZTIME ?= 10s
COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/veerhq/veer/internal/version.Commit=$(COMMIT)

.PHONY: all build test check fmt-check vet vet-sdk-os staticcheck unit bench-check deps bench fuzz cover clean bench-failover bench-guard bench-gateway bench-async

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/veer ./cmd/veer

## test: everything CI checks: formatting, vet, staticcheck, race-enabled tests.
test: deps check

check: fmt-check vet vet-sdk-os staticcheck unit bench-check

fmt-check:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(STATICCHECK) $(PKGS)

## vet-sdk-os: everything builds and vets for macOS (a developer's laptop; veer up itself
## wants Linux), and the client SDK's packages for Windows too (the apps' systems).
SDK_PKGS := ./lastmile/... ./failover/... ./routing/... ./tier/... ./outcome/... ./retry/... ./clock/...
vet-sdk-os:
	GOOS=windows $(GO) vet $(SDK_PKGS)
	GOOS=darwin $(GO) vet $(PKGS)

## The real Mahimahi drives (issue 17) are not in the repository (their licence differs): the
## simulator's real-drive tests run when VEER_TRACES names them, or ../shared/traces exists.
TRACES_DIR := $(or $(VEER_TRACES),$(wildcard $(abspath ../shared/traces)))

unit:
	@if [ -z "$(TRACES_DIR)" ]; then echo "NOTE: real-drive simulator tests skipped: set VEER_TRACES to the Mahimahi drives' folder (docs/sim.md)"; fi
	VEER_TRACES=$(TRACES_DIR) $(GO) test -race -timeout 15m $(PKGS)

## bench-check: the nested bench module (peers live there) builds, vets and passes its tests.
bench-check:
	cd bench && $(GO) vet ./... && $(GO) test -count=1 ./...

## deps: install the real servers the integration tests start (Debian).
deps:
	@./scripts/test-deps.sh

## bench: Go microbenchmarks in benchstat format (compare runs with benchstat).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 10 $(PKGS) | tee bench.txt

## bench-failover: Transport vs the bare round tripper, 10 alternating rounds, benchstat table
## (docs/failover.md).
bench-failover:
	$(GO) test -c -o bin/failover.test ./failover/
	cd failover && for i in $$(seq 10); do ../bin/failover.test -test.run '^$$' -test.bench Transport -test.benchmem; done > ../bin/bench-failover.txt
	$(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da -col /rt bin/bench-failover.txt

## bench-guard: flow control vs peers (x/time/rate, sony/gobreaker, redis_rate), ratios; see docs/guard.md.
bench-guard: deps
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -count 5 ./guard/ | tee ../bench-guard.txt
	$(GO) test -run '^$$' -bench Admit -benchmem -count 5 ./limit/limitredis/ | tee -a bench-guard.txt
	cd bench && $(GO) build -o ../bin/guardbench ./cmd/guardbench
	bin/guardbench -rounds 5 -what local,breaker | tee bench-guard.md
	taskset -c 1 bin/guardbench -rounds 5 -what redis -redis-cpu 0 | tee -a bench-guard.md

## bench-release: the real bad-B rollout cases (failing 5 %, 3x slower, p99 alone 3x) 20 times each on
## fresh rigs (etcd, control, two gateways, 500 req/s): the distributions of time to abort and of B's
## failed requests; see docs/release.md.
.PHONY: bench-release
bench-release:
	./scripts/test-deps.sh
	$(GO) test -count=1 -v -timeout 60m -run 'TestRelease(Bad|Slow|Tail)Aborted' ./test/ -args -release.runs=20 | tee bench-release.txt

## bench-async: durable async submissions/s and p99 to the store's ack: embedded JetStream (sync always),
## an external nats-server, a file with fsync per submission and with group commit; see docs/async.md.
bench-async:
	./scripts/test-deps.sh
	cd bench && $(GO) build -o ../bin/asyncbench ./cmd/asyncbench
	bin/asyncbench -rounds 5 -n 5000 -c 64 -tenants 8 | tee bench-async.md
	bin/asyncbench -rounds 5 -n 5000 -c 64 -tenants 1 | tee -a bench-async.md

## bench-gateway: veer gateway vs HAProxy, nginx, Caddy and a tuned ReverseProxy, 3 interleaved
## rounds, one core each for backend+load and proxy; see docs/gateway.md.
bench-gateway:
	./bench/gateway/deps.sh
	$(GO) build -o bin/veer ./cmd/veer
	cd bench && $(GO) build -o ../bin/gatewaybench ./cmd/gatewaybench
	taskset -c 0 bin/gatewaybench -veer bin/veer -rounds 3 -d 3s | tee bench-gateway.md

## fuzz: run every fuzz target briefly (FUZZTIME each), all of them whatever one did; one line
## a target (scripts/fuzz.sh says how a bare deadline of Go 1.26's coordinator is judged).
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh $(PKGS)

## cover: coverage profile and per-function summary.
cover:
	$(GO) test -coverprofile=cover.out $(PKGS)
	$(GO) tool cover -func=cover.out | tail -1

clean:
	rm -rf bin cover.out bench.txt bench-guard.txt bench-guard.md bench-dns.md bench-control.md

## sim-figures: every bundled simulator scenario as Markdown, with charts in sim-out/.
.PHONY: sim-figures
sim-figures:
	mkdir -p sim-out
	$(GO) run ./cmd/veer sim --scenario all --format markdown --plots sim-out | tee sim-out/results.md

## sim-real: the scenarios of sim/testdata/real on the real Mahimahi drives, which stay
## outside the repository (TRACES=folder, default ../shared/traces), into sim-out/real/.
TRACES ?= ../shared/traces
.PHONY: sim-real
sim-real:
	@test -f $(TRACES)/ATT-LTE-driving.down || { echo "real drives not found in $(TRACES): make sim-real TRACES=/path/to/traces"; exit 1; }
	mkdir -p sim-out/real
	for f in sim/testdata/real/*.yaml; do sed "s|TRACES/|$(abspath $(TRACES))/|" $$f > sim-out/real/$$(basename $$f); done
	$(GO) run ./cmd/veer sim --scenario $$(ls sim-out/real/*.yaml | paste -sd, -) --format markdown --plots sim-out/real | tee sim-out/real/results.md

## bench-shed: side-by-side overload bench of shed vs peers (docs/shed.md); about
## eight and a half minutes a round (scenario 3 alone 2.5; each cpu scenario's round
## measures capacity first, 3 s), not part of `make test`. SHEDBENCH_FLAGS="-format json -rounds 5" etc.
.PHONY: bench-shed
bench-shed:
	cd bench && $(GO) build -o ../bin/shedbench ./cmd/shedbench
	@if command -v taskset >/dev/null; then taskset -c 1 bin/shedbench $(SHEDBENCH_FLAGS); \
	else echo "taskset not found: generator and server are not pinned"; bin/shedbench $(SHEDBENCH_FLAGS); fi

## lastmile-experiment: access success and TTFB, plain vs the last-mile chain (docs/lastmile.md).
.PHONY: lastmile-experiment
lastmile-experiment:
	cd bench && $(GO) run ./cmd/lastmilebench -n 1000 -mix default -seed 1

## bench-dns: veer dns vs NSD and Knot DNS under dnsperf, same zone, rounds interleaved with the
## order rotated (docs/dns.md); about two minutes. DNSBENCH_FLAGS="-rounds 5 -d 20s -q 200" etc.
.PHONY: bench-dns
bench-dns: deps build
	cd bench && $(GO) run ./cmd/dnsbench -veer ../bin/veer $(DNSBENCH_FLAGS) | tee ../bench-dns.md

## lastmile-rtt: cold and warm TTFB over emulated RTT x loss, plain vs TCP vs HTTP/3-raced (docs/lastmile.md).
.PHONY: lastmile-rtt
lastmile-rtt:
	cd bench && $(GO) run ./cmd/lastmilertt -n 40 -rtt 50ms,150ms,300ms -loss 0,0.01,0.05

## bench-gwstore: propagation of a limits document from etcd to two following gateways, 100 changes
## (docs/gateway.md, issue 16's propagation target).
.PHONY: bench-gwstore
bench-gwstore: deps
	cd bench && $(GO) run ./cmd/gwstorebench -changes 100

## bench-control: `veer control` figures (docs/control.md): answers per server CPU-second under hey
## against a static handler, 5 interleaved rounds; override propagation over 3 instances on etcd.
.PHONY: bench-control
bench-control: deps
	cd bench && $(GO) run ./cmd/controlbench -mode load -rounds 5 | tee ../bench-control.md
	cd bench && $(GO) run ./cmd/controlbench -mode propagation -changes 100 | tee -a ../bench-control.md
