# Waggle core. `make run` starts everything in one process; `make test` is
# what CI runs.
GO      ?= go
MODULES := libs services/approval services/command services/gateway services/sessionstore services/turnrunner services/waggle
PKGS    := $(MODULES:%=./%/...)
BENCHTIME ?= 1s
# What `waggle version` prints: the nearest tag and commit, "dev" outside git.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: build run test test-cluster test-short lint fmt bench tidy clean cluster

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/waggle ./services/waggle/cmd/waggle

run: build
	./bin/waggle serve

# The load tests (e2e/load) skip themselves under the race detector, which
# slows the server too much for them to mean anything; they run in a second
# pass without it.
test:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)
	$(GO) test -count=1 -timeout 10m ./services/waggle/e2e/load/

# The three-node NATS cluster suite (services/waggle/e2e/cluster): nodes
# killed with SIGKILL and restarted under live turns. Minutes long, so not
# part of `make test`; CI runs it (.ci/run).
test-cluster:
	WAGGLE_TEST_CLUSTER=1 $(GO) test -count=1 -timeout 20m -v -run '$(or $(RUN),.)' ./services/waggle/e2e/cluster/

test-short:
	$(GO) test -count=1 -short $(PKGS)

lint:
	@out="$$(gofmt -l libs services)"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	./scripts/check-imports.sh

fmt:
	gofmt -w libs services

bench: build
	$(GO) build -o bin/wagglebench ./services/waggle/cmd/wagglebench
	./bin/wagglebench -waggle bin/waggle $(BENCHFLAGS)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 10m $(PKGS)

tidy:
	for m in $(MODULES); do (cd $$m && $(GO) mod tidy) || exit 1; done

# The team-server topology as local processes (no Docker): see scripts/cluster.sh.
cluster: build
	./scripts/cluster.sh

clean:
	rm -rf bin .cluster
