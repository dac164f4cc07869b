package crc32c

import "golang.org/x/sys/cpu"

// useFold is whether this CPU and kernel run the assembly: AVX-512
// (foundation, for the 512-bit registers and their XORs and extracts, which
// cpu reports only when the kernel saves their state; BW, for the byte-masked
// loads and stores that join a header to its payload), VPCLMULQDQ for the
// 512-bit products, PCLMULQDQ and AVX2 for the 128- and 256-bit steps,
// POPCNT, and SSE4.2 for the CRC32 instruction.
var useFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VPCLMULQDQ &&
	cpu.X86.HasPCLMULQDQ && cpu.X86.HasAVX2 && cpu.X86.HasPOPCNT && cpu.X86.HasSSE42

// fold returns the unreflected CRC32C register after n bytes, starting
// from the register c, and copies the bytes it reads from p to dst unless
// dst is nil. n is a multiple of 16, at least 64. If head is nil, the n
// bytes are p's. Otherwise the first h are head's, where mask is the low h
// bits set (0 < h <= 64), and the other n-h are p's, copied to dst (not
// nil) as they are read.
//
//go:noescape
func fold(c uint32, head *byte, mask uint64, dst, p *byte, n int) uint32
