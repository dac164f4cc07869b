package ecnmark

// The object file and its Go bindings (marker_bpfel.o, marker_bpfel.go) are
// generated from ecn_mark.c and committed, so building needs no clang. After
// editing the C source, run `go generate ./internal/ecnmark/` with clang,
// llvm-strip and libbpf-dev installed, and commit the result;
// TestGeneratedUpToDate fails while the committed files do not match the
// source. As in bpf/gen.go: little endian only, Debian's include paths for
// asm/types.h, bpf2go's default -O2 -g spelled out.
//
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel marker ecn_mark.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu -O2 -g -Wall -Werror
