# stormguard: every module listed in go.work is checked and tested.
SHELL := /bin/bash
GO ?= go
GOBIN := $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(GOBIN)/staticcheck
BENCHSTAT := $(GOBIN)/benchstat
APIDIFF := $(GOBIN)/apidiff
MODULES := $(shell $(GO) list -m -f '{{.Dir}}')

.PHONY: all test test-nodeps deps fmt-check vet staticcheck race lab bench bench-compare tools installtest release-dry-run apicheck

all: test

## test: installs what the tests need (scripts/test-deps.sh: redis-server,
## chromium, promtool; fails naming what it cannot install), then gofmt
## check, go vet, staticcheck and go test -race over every module.
test: deps
	@$(MAKE) --no-print-directory test-nodeps

## test-nodeps: the same without the install step; tests whose tool is
## missing skip (and fail when CI=true). The race step covers every module
## of go.work, internal/releasetest too: the offline install test
## (TestInstallFromProxyOffline) and the scripts/release.sh tests run there.
test-nodeps: fmt-check vet staticcheck race

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
	@set -e; for m in $(MODULES); do echo "vet $$m"; (cd $$m && $(GO) vet ./...); done

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
	@set -e; for m in $(MODULES); do echo "staticcheck $$m"; (cd $$m && $(STATICCHECK) ./...); done

race: $(APIDIFF)
	@set -e; for m in $(MODULES); do echo "test -race $$m"; (cd $$m && $(GO) test -race -count=1 -timeout 15m ./...); done

## sim-full: the sim tests without the race detector, among them those
## that run whole scenarios (fullModel), which skip under -race: part of
## test-nodeps, so make test runs every sim test.
.PHONY: sim-full
test-nodeps: sim-full
sim-full:
	cd sim && $(GO) test -count=1 -timeout 15m .

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
