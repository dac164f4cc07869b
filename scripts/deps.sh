#!/usr/bin/env bash
# Installs the Debian packages that one purpose of the repository needs,
# only those missing, and says which. `make deps-test`, `make deps-demo`
# and `make deps-install` call it; so do `make test`, `make demo` and
# `make install`, so a fresh machine needs no other step. Without root (or
# without apt-get) it refuses, naming the exact packages to install.
#
#   scripts/deps.sh test|demo|install|fabtests|all
#
# Each entry is "command:package": the command a test or demo runs, and the
# Debian package that ships it. A command already on PATH is taken as
# present whatever installed it.
set -euo pipefail

demo_deps=(
	ip:iproute2     # namespaces, veth, routes
	nft:nftables    # the switch namespace's loss and the spines' counters
	ethtool:ethtool # veth offloads, on or off, for the TCP baselines
	sysctl:procps   # each namespace's IPv6 and forwarding settings (a minimal Debian lacks it)
)
test_deps=(
	"${demo_deps[@]}"
	make:make
	clang:clang              # bpf/ regenerates the XDP object and compares
	llvm-strip:llvm
	promtool:prometheus      # PromQL of the dashboard and the metrics
	prometheus:prometheus    # a real server scrapes the daemon
	systemd-analyze:systemd  # the unit verifies and keeps its hardening
	"tshark:tshark"          # the Wireshark dissector runs over captures
	"tcpdump:tcpdump"        # testnet captures a namespace's interface
	cc:gcc                   # libmetaroce/ builds its C tests with AddressSanitizer
	fi_info:libfabric-bin    # the metaroce libfabric provider is listed and run
	fi_pingpong:libfabric-bin
	mpirun:openmpi-bin       # an MPI program runs on the provider (pml cm, mtl ofi)
	mpicc:libopenmpi-dev     # and is built with Open MPI's compiler wrapper
)
# make install builds libmetaroce and its libfabric provider (install-clib).
install_deps=(
	cc:gcc
)
# make fabtests (metaroce fabtests): the namespaces, and what building
# libfabric's fabtests from a checkout needs (./autogen.sh, configure, make).
fabtests_deps=(
	"${demo_deps[@]}"
	make:make
	cc:gcc
	autoreconf:autoconf
	automake:automake
	libtoolize:libtool
	fi_info:libfabric-bin
)
# libbpf-dev and libfabric-dev ship headers, not commands: checked by file.
libfabric_header=/usr/include/rdma/fabric.h:libfabric-dev # the provider's build (-lfabric)
header_deps=(/usr/include/bpf/bpf_helpers.h:libbpf-dev "$libfabric_header")

case "${1:-}" in
demo) want=("${demo_deps[@]}"); headers=() ;;
test) want=("${test_deps[@]}"); headers=("${header_deps[@]}") ;;
install) want=("${install_deps[@]}"); headers=("$libfabric_header") ;;
fabtests) want=("${fabtests_deps[@]}"); headers=("$libfabric_header") ;;
all) want=("${test_deps[@]}"); headers=("${header_deps[@]}") ;;
*)
	echo "usage: $0 test|demo|install|fabtests|all" >&2
	exit 2
	;;
esac

missing=()
for e in "${want[@]}"; do
	cmd=${e%%:*} pkg=${e#*:}
	command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done
# DEPS_ROOT moves the header check under another root (the test's).
for e in "${headers[@]}"; do
	f=${e%%:*} pkg=${e#*:}
	[ -e "${DEPS_ROOT:-}$f" ] || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
# One package can be named by two commands (prometheus).
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "deps: missing Debian packages for '$1': ${missing[*]}" >&2
	echo "deps: install them as root: apt-get install ${missing[*]}" >&2
	exit 1
fi
echo "deps: installing the Debian packages '$1' needs and this machine lacks: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: installed ${missing[*]}"
