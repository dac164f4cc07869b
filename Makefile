# The test target is what CI runs (.ci/run) and what README.md shows.
# Run it as root: the AF_XDP, BPF and network-namespace tests need root
# and skip, saying why, without it.

GO       ?= go
FUZZTIME ?= 10s
# Packages whose tests exercise concurrency or shared memory run again
# under the race detector.
RACE_PKGS = ./transport/... ./sim/... ./dataplane/... ./internal/... ./ring/... ./compliance/...

.PHONY: test lint unit race fuzz bench generate

test: lint unit race fuzz

lint:
	@out=$$(gofmt -l . | grep -v '^vendor/' || true); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./...

race:
	$(GO) test -race -count=1 $(RACE_PKGS)

fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) ./scripts/fuzz.sh

bench:
	$(GO) test -run=NONE -bench=. -benchmem ./wire/... ./transport/... ./sim/...

generate:
	$(GO) generate ./bpf/
