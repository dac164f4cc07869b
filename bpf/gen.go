package bpf

// The object file and its Go bindings (steer_bpfel.o, steer_bpfel.go) are
// generated from xdp_steer.c and committed, so building needs no clang. After
// editing the C source, run `go generate ./bpf/` with clang, llvm-strip and
// libbpf-dev (for the bpf/ headers) installed, and commit the result;
// TestGeneratedUpToDate fails while the committed files do not match the
// source. Only the little-endian target is generated: amd64 and arm64 are
// both little endian. The include paths are where Debian keeps asm/types.h;
// -O2 and -g are bpf2go's defaults, spelled out.
//
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel steer xdp_steer.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu -O2 -g -Wall -Werror
