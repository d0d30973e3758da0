# Sluice: the two commands are `make run` and `make test`.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
BIN := bin/sluice
# Where `make run` serves from. The binary's own defaults are localhost:8080 and ./flows;
# the repository keeps its saved flows out of the source tree, in var/flows.
ADDR ?= localhost:8080
FLOWS ?= var/flows
# The real Redis the tests use; database 15 so a developer's data in 0 is left alone.
TEST_REDIS_URL ?= $(if $(REDIS_URL),$(REDIS_URL),redis://127.0.0.1:6379/15)

.PHONY: run test test-faults build generate ui lint deps check-generated docs clean

# make run builds with source maps (a developer's binary); make build leaves them out.
run: UI_FLAGS := --sourcemap
run: build
	./$(BIN) serve --addr $(ADDR) --flows $(FLOWS)

build: generate ui
	$(GO) build -o $(BIN) ./cmd/sluice

test: deps check-generated ui
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	npm run --silent typecheck
	npm test --silent
	$(GO) run ./cmd/sluice components --markdown | diff -u docs/components.md - || { echo "docs/components.md is stale; run 'make docs' and commit it"; exit 1; }
	REDIS_URL="$(TEST_REDIS_URL)" $(GO) test -count=1 -timeout 20m ./...
	# Every example's test cases (docs/testing-flows.md), as CI would run a flows folder's.
	REDIS_URL= $(GO) run ./cmd/sluice test flows/examples/*.json
	# A count, not a duration: Go 1.26's fuzz coordinator can fail a duration-bounded run
	# at its deadline with a bare "context deadline exceeded" (golang/go#75804, fixed in 1.27).
	$(GO) test -count=1 -timeout 5m -run '^$$' -fuzz FuzzCompile -fuzztime 10000x ./flows/

# The fault suite at full size (make test runs it small): worker processes killed under
# load, a poison pill, Redis killed and restarted with and without AOF, a flaky network.
test-faults:
	SLUICE_FAULTS=full REDIS_URL="$(TEST_REDIS_URL)" $(GO) test -count=1 -timeout 60m -run 'Fault' -v ./flows/engine/ ./cmd/sluice/

# npm ci only when the lock file changed since the last install.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

deps: node_modules/.package-lock.json

generate:
	$(GO) tool templ generate -log-level error

UI_FLAGS ?=
ui: deps
	npm run --silent build -- $(UI_FLAGS)

# The generated _templ.go files are committed (so `go build` and `go install` work
# without templ); this fails when they do not match their .templ sources.
check-generated: generate
	@if git rev-parse --git-dir >/dev/null 2>&1 && [ -n "$$(git status --porcelain -- '*_templ.go')" ]; then \
		echo "generated templ files are stale; run 'make generate' and commit them:"; \
		git status --porcelain -- '*_templ.go'; exit 1; fi

# docs/components.md is generated from the component registry; `make test` fails when
# the committed file differs from what this writes.
docs:
	$(GO) run ./cmd/sluice components --markdown > docs/components.md.tmp && mv docs/components.md.tmp docs/components.md

lint: deps
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	npm run --silent typecheck

clean:
	rm -rf bin static/dist/*.js static/dist/*.css static/dist/*.map
