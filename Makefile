# veer: build, test and measure. `make test` is what CI runs.
SHELL := /bin/bash
GO ?= go
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
PKGS := ./...
FUZZTIME ?= 10s
COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/veerhq/veer/internal/version.Commit=$(COMMIT)

.PHONY: all build test check fmt-check vet staticcheck unit deps bench fuzz cover clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/veer ./cmd/veer

## test: everything CI checks: formatting, vet, staticcheck, race-enabled tests.
test: deps check

check: fmt-check vet staticcheck unit

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(STATICCHECK) $(PKGS)

unit:
	$(GO) test -race -timeout 15m $(PKGS)

## deps: install the real servers the integration tests start (Debian).
deps:
	@./scripts/test-deps.sh

## bench: Go microbenchmarks in benchstat format (compare runs with benchstat).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 10 $(PKGS) | tee bench.txt

## fuzz: run every fuzz target briefly (FUZZTIME each).
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

## cover: coverage profile and per-function summary.
cover:
	$(GO) test -coverprofile=cover.out $(PKGS)
	$(GO) tool cover -func=cover.out | tail -1

clean:
	rm -rf bin cover.out bench.txt

## lastmile-experiment: access success and TTFB, plain vs the last-mile chain (docs/lastmile.md).
.PHONY: lastmile-experiment
lastmile-experiment:
	cd bench && $(GO) run ./cmd/lastmilebench -n 1000 -mix default -seed 1
