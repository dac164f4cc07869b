# The test and demo targets are the two commands README.md shows; CI runs
# the first (.ci/run). Each installs the Debian packages it needs first
# (scripts/deps.sh: only what is missing, and it says what). Run them as
# root: the AF_XDP, BPF and network-namespace tests need root and skip,
# saying why, without it.

# sudo's secure_path usually lacks Go's directory: fall back to the
# standard install location so `sudo make test` finds the toolchain.
GO       ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
# gofmt is the one beside that go (secure_path lacks it too), else the one
# on PATH; lint fails, saying so, if neither runs.
GOFMT    ?= $(shell g='$(dir $(GO))gofmt'; [ -x "$$g" ] && echo "$$g" || command -v gofmt 2>/dev/null || echo gofmt)
FUZZTIME ?= 10s
# Packages whose tests exercise concurrency or shared memory run again
# under the race detector.
RACE_PKGS = ./transport/... ./sim/... ./dataplane/... ./internal/... ./ring/... ./telemetry/... ./control/... ./client/... ./examples/... ./compliance/...

# make install: the daemon, the metaroce tool, the systemd unit and the
# minimal configuration (interfaces only; kept if one is there), with the
# every-key reference beside the docs in $(DATADIR)/metaroced; then the
# Wireshark dissector and libmetaroce (install-clib, which needs gcc and
# libfabric-dev: deps-install installs them if missing). PREFIX is where binaries
# and the unit go; DESTDIR stages an install for packaging. The unit names
# /usr/local/bin/metaroced: with another PREFIX its ExecStart is rewritten.
PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR      = $(PREFIX)/bin
UNITDIR    ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR ?= /etc
DATADIR    ?= $(PREFIX)/share

# DEMO_FLAGS are passed to `metaroce demo` (for example -topology leafspine).
DEMO_FLAGS ?= -json
# Stamped into both binaries: `metaroce version`, `metaroced -version`.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
LDFLAGS  = -X github.com/metaroce/metaroce/internal/version.Version=$(VERSION)

.PHONY: test lint gofmt-check unit race fuzz bench generate build install deps deps-test deps-demo deps-install demo

test: deps-test
	$(MAKE) lint unit race fuzz

deps: deps-test
deps-test:
	@./scripts/deps.sh test
deps-demo:
	@./scripts/deps.sh demo
deps-install:
	@./scripts/deps.sh install

# The main demo: two hosts, a lossy switch, two daemons, the perf tools
# through the client library, the raw AF_XDP and TCP baselines (root).
demo: deps-demo build
	./bin/metaroce demo $(DEMO_FLAGS)

lint: gofmt-check
	$(GO) vet ./...

# gofmt -l lists the files it would change; a gofmt that is missing or
# fails (a file it cannot parse) fails the check instead of listing none.
gofmt-check:
	@command -v '$(GOFMT)' >/dev/null 2>&1 || { echo "lint: gofmt not found ('$(GOFMT)'): set GOFMT or put Go's bin directory on PATH" >&2; exit 1; }
	@out=$$('$(GOFMT)' -l .) || { echo "lint: '$(GOFMT)' -l . failed" >&2; exit 1; }; \
	out=$$(printf '%s\n' "$$out" | grep -v '^vendor/' || true); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# One package at a time (-p 1): the raw AF_XDP baselines and the engines
# spin on pinned threads by design, and two such packages side by side on
# a two-core machine starve each other (measured: a raw baseline receiving
# 64 of 689,984 frames, a demo at 0.05 Gb/s, beside another package's
# daemons; each alone passes).
unit:
	$(GO) test -p 1 -count=1 ./...

race:
	$(GO) test -p 1 -race -count=1 $(RACE_PKGS)

fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) ./scripts/fuzz.sh

bench:
	$(GO) test -run=NONE -bench=. -benchmem ./wire/... ./transport/... ./sim/...

generate:
	$(GO) generate ./bpf/

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/metaroced ./cmd/metaroced
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/metaroce ./cmd/metaroce

install: deps-install build
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/metaroced $(DESTDIR)$(DATADIR)/metaroced
	install -m 0755 bin/metaroced bin/metaroce $(DESTDIR)$(BINDIR)/
	sed 's|/usr/local/bin/metaroced|$(BINDIR)/metaroced|; s|/etc/metaroced/|$(SYSCONFDIR)/metaroced/|' \
		deploy/metaroced.service > $(DESTDIR)$(UNITDIR)/metaroced.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/metaroced.service
	install -m 0644 deploy/metaroced.yaml $(DESTDIR)$(DATADIR)/metaroced/metaroced.reference.yaml
	test -e $(DESTDIR)$(SYSCONFDIR)/metaroced/metaroced.yaml || \
		install -m 0644 deploy/metaroced.minimal.yaml $(DESTDIR)$(SYSCONFDIR)/metaroced/metaroced.yaml
	$(MAKE) install-wireshark
	$(MAKE) install-clib

# The Wireshark dissector, in the Lua plugin directory tshark names (or
# WIRESHARK_PLUGIN_DIR), beside the docs too (deploy/wireshark/install.sh).
# libmetaroce, the C client library (libmetaroce/: docs/api.md without a
# Go runtime): a shared and a static library in libmetaroce/build.
CC       ?= cc
CLIB_DIR  = libmetaroce
CLIB_OUT  = $(CLIB_DIR)/build
CLIB_SRC  = $(wildcard $(CLIB_DIR)/src/*.c)
CLIB_FLAGS = -std=gnu11 -O2 -g -Wall -Wextra -Werror -fPIC -fvisibility=default -I$(CLIB_DIR)/include
.PHONY: clib
clib: $(CLIB_OUT)/libmetaroce.so $(CLIB_OUT)/libmetaroce.a $(CLIB_OUT)/libmetaroce-fi.so
# The libfabric provider "metaroce" (docs/libfabric.md), the library inside;
# against Debian's libfabric-dev headers.
CLIB_PROV = $(wildcard $(CLIB_DIR)/fabric/*.c)
$(CLIB_OUT)/libmetaroce-fi.so: $(CLIB_PROV) $(wildcard $(CLIB_DIR)/fabric/*.h) $(CLIB_SRC) $(CLIB_DIR)/include/metaroce.h
	@mkdir -p $(CLIB_OUT)
	$(CC) $(CLIB_FLAGS) -shared -o $@ $(CLIB_PROV) $(CLIB_SRC) -lfabric -lpthread
$(CLIB_OUT)/libmetaroce.so: $(CLIB_SRC) $(CLIB_DIR)/src/internal.h $(CLIB_DIR)/include/metaroce.h
	@mkdir -p $(CLIB_OUT)
	$(CC) $(CLIB_FLAGS) -shared -Wl,-soname,libmetaroce.so.1 -o $@ $(CLIB_SRC) -lpthread
$(CLIB_OUT)/libmetaroce.a: $(CLIB_SRC) $(CLIB_DIR)/src/internal.h $(CLIB_DIR)/include/metaroce.h
	@mkdir -p $(CLIB_OUT)/obj
	for f in $(CLIB_SRC); do $(CC) $(CLIB_FLAGS) -c $$f -o $(CLIB_OUT)/obj/$$(basename $$f .c).o || exit 1; done
	ar rcs $@ $(CLIB_OUT)/obj/*.o

# make install-clib: libmetaroce's libraries, header and pkg-config file
# (pkg-config --cflags --libs metaroce).
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
.PHONY: install-clib
install-clib: deps-install clib
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)
	install -m 0644 $(CLIB_DIR)/include/metaroce.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 0755 $(CLIB_OUT)/libmetaroce.so $(DESTDIR)$(LIBDIR)/libmetaroce.so.1
	ln -sf libmetaroce.so.1 $(DESTDIR)$(LIBDIR)/libmetaroce.so
	install -m 0644 $(CLIB_OUT)/libmetaroce.a $(DESTDIR)$(LIBDIR)/
	install -d $(DESTDIR)$(LIBDIR)/libfabric
	install -m 0755 $(CLIB_OUT)/libmetaroce-fi.so $(DESTDIR)$(LIBDIR)/libfabric/
	printf 'prefix=%s\nlibdir=%s\nincludedir=%s\n\nName: metaroce\nDescription: C client library of metaroced\nVersion: %s\nCflags: -I$${includedir}\nLibs: -L$${libdir} -lmetaroce\nLibs.private: -lpthread\n' \
		'$(PREFIX)' '$(LIBDIR)' '$(INCLUDEDIR)' '$(VERSION)' > $(DESTDIR)$(LIBDIR)/pkgconfig/metaroce.pc

.PHONY: install-wireshark
install-wireshark:
	DESTDIR='$(DESTDIR)' DATADIR='$(DATADIR)' ./deploy/wireshark/install.sh

# make fabtests: libfabric's own test suite (fabtests 1.17.0, matching
# Debian's libfabric) through the metaroce provider and through
# tcp;ofi_rxm, two namespaces through a lossy switch, at 0 and 1% loss:
# a table per provider and loss, a summary and a verdict (docs/libfabric.md,
# "fabtests"). Root. fabtests is not in this repository: the first run
# builds it from FABTESTS_SRC (a libfabric checkout: a libfabric or
# fabtests tree, or GITDIR@v1.17.0) into /var/cache/metaroce/fabtests-1.17.0
# (FABTESTS_CACHE); without a source or a cached build it says so and
# skips. FABTESTS_FLAGS go to `metaroce fabtests` (-oob, -loss 0, -json,
# -out FILE, -timeout 60s, -match REGEXP; -h lists them).
FABTESTS_FLAGS ?=
.PHONY: fabtests deps-fabtests
deps-fabtests:
	@./scripts/deps.sh fabtests
fabtests: deps-fabtests build clib
	./bin/metaroce fabtests -provider-dir $(CLIB_OUT) $(FABTESTS_FLAGS)

# make demo-mpi: Open MPI over the metaroce provider beside Open MPI over
# its TCP BTL, -hosts 4 x -ranks-per-host 2 in namespaces through a lossy
# switch, at 0 and 1% loss: the OSU micro-benchmarks with validation and a
# data-parallel training loop (docs/demo.md, "The MPI demo"). Root; Open
# MPI from openmpi-bin and libopenmpi-dev (make deps-test). OSU is not in
# this repository: the first run builds it from OSU_SRC (a source tree or
# a git directory) into /var/cache/metaroce/osu; without either it says so
# and runs the training loop alone. MPI_DEMO_FLAGS go to `metaroce demo
# -topology mpi` (-json, -out DIR, -hosts N, -ranks-per-host R; -h lists
# them).
MPI_DEMO_FLAGS ?=
.PHONY: demo-mpi
demo-mpi: deps-demo build clib
	./bin/metaroce demo -topology mpi -provider-dir $(CLIB_OUT) $(MPI_DEMO_FLAGS)
