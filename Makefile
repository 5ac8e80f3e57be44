# stormguard: every module listed in go.work is checked and tested.
SHELL := /bin/bash
GO ?= go
GOBIN := $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(GOBIN)/staticcheck
BENCHSTAT := $(GOBIN)/benchstat
APIDIFF := $(GOBIN)/apidiff
MODULES := $(shell $(GO) list -m -f '{{.Dir}}')

# PACKAGES: every package of every module of go.work, as patterns one go
# command resolves through the workspace (one vet, one staticcheck, one
# go test: each builds a package once, and runs two jobs at a time across
# modules, where a module after module left a core idle). SLOWEST go
# first: the go command starts packages in the order named, and the
# longest test binaries under -race would otherwise start last and run
# alone.
SLOWEST := ./sim ./live ./internal/releasetest ./simtest ./cmd/stormsim
PACKAGES := $(SLOWEST) $(addsuffix /...,$(MODULES))

# FULL: the packages whose whole-scenario tests (fullModel: they skip
# under -race) the sim-full job runs without the race detector, and those
# with code that only builds without it (//go:build !race: hedge's per-P
# call cells), so that code is tested too.
FULL := ./sim ./simtest/... ./cmd/stormsim/... ./hedge

# gotest runs go test with the arguments $(1); when it fails, it repeats
# the failing packages' and tests' lines at the end of the output, and
# exits 1.
define gotest
set -o pipefail; log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
$(GO) test $(1) 2>&1 | tee "$$log" || { \
	echo; echo "FAILED: the failing packages and tests"; \
	grep -E '^[[:space:]]*--- FAIL|^FAIL[[:space:]]|^panic: ' "$$log"; exit 1; }
endef

.PHONY: all test test-nodeps deps fmt-check vet staticcheck race lab bench bench-compare tools installtest release-dry-run apicheck

all: test

## test: installs what the tests need (scripts/test-deps.sh: redis-server,
## chromium, promtool; fails naming what it cannot install), then gofmt
## check, go vet, staticcheck, go test -race over every module, and the
## whole-scenario tests of sim, simtest and cmd/stormsim without -race
## (sim-full).
test: deps
	@$(MAKE) --no-print-directory test-nodeps

## test-nodeps: the same without the install step; tests whose tool is
## missing skip (and fail when CI=true). The race step covers every module
## of go.work, internal/releasetest too: the offline install test
## (TestInstallFromProxyOffline) and the scripts/release.sh tests run there.
## The steps run one after the other, each on both cores.
test-nodeps: fmt-check vet staticcheck race sim-full

## installtest: only the release checks of internal/releasetest: every module
## published to a file-system proxy at versions.yaml's version, then
## `go install cmd/stormsim@VERSION` and a scratch module built from it with
## a fresh module cache, GOWORK=off and no network; the module layout; and
## scripts/release.sh in a temporary repository.
installtest:
	cd internal/releasetest && $(GO) test -count=1 -timeout 10m -v .

## release-dry-run: what `scripts/release.sh VERSION` would edit and tag
## (make release-dry-run VERSION=v0.3.0; the default is versions.yaml's).
release-dry-run:
	scripts/release.sh --dry-run $(or $(VERSION),$(shell sed -n 's/^version:[[:space:]]*//p' versions.yaml))

deps:
	@scripts/test-deps.sh

fmt-check:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	@echo "vet: $(words $(MODULES)) modules"
	@$(GO) vet $(PACKAGES)

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

$(BENCHSTAT):
	$(GO) install golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

$(APIDIFF):
	$(GO) install golang.org/x/exp/cmd/apidiff@v0.0.0-20261113113407-e3970619a1a4

tools: $(STATICCHECK) $(BENCHSTAT) $(APIDIFF)

## apicheck: each released module (versions.yaml) against its previous
## release tag with apidiff; prints the incompatible changes, or that there
## is no previous tag, and exits 0 (STRICT=1: exits 1 on a breaking change;
## BASE=vX.Y.Z: compare with that release). The pre-1.0 policy is in
## CONTRIBUTING.md.
apicheck: $(APIDIFF)
	@APIDIFF=$(APIDIFF) scripts/apicheck.sh $(if $(STRICT),--strict) $(BASE)

staticcheck: $(STATICCHECK)
	@echo "staticcheck: $(words $(MODULES)) modules"
	@$(STATICCHECK) $(PACKAGES)

## race: go test -race over every package of every module, in one go
## command (two test binaries at a time).
race: $(APIDIFF)
	@echo "test -race: $(words $(MODULES)) modules"
	@$(call gotest,-race -count=1 -timeout 15m $(PACKAGES))

## sim-full: the tests of sim, simtest, cmd/stormsim and hedge without the
## race detector, among them those that run whole scenarios or storms
## (fullModel), which skip under -race, and hedge's per-P call cells,
## which race builds leave out: part of test-nodeps, so make test runs
## every one of their tests.
.PHONY: sim-full
sim-full:
	@echo "test (no -race): $(FULL)"
	@$(call gotest,-count=1 -timeout 15m $(FULL))

## lab: run the storm lab's default scenario suite.
lab:
	$(GO) run ./cmd/stormsim

## bench: the library's benchmarks, 6 runs each, summarised by benchstat.
bench: $(BENCHSTAT)
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./... | tee /tmp/stormguard-bench.txt
	$(BENCHSTAT) /tmp/stormguard-bench.txt

## bench-compare: stormguard against failsafe-go, cenkalti/backoff, retry-go,
## go-retry, gobreaker and go-retryablehttp in one run (bench/ module);
## prints one column per library with its ratio to stormguard.
bench-compare: $(BENCHSTAT)
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -count 6 . | tee results.txt
	$(BENCHSTAT) -col /lib bench/results.txt
	cd bench && $(GO) run ./benchtable results.txt > tables.md
	@echo "bench/tables.md holds the Markdown tables for BENCHMARKS.md"
