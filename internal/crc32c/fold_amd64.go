package crc32c

import "golang.org/x/sys/cpu"

// useFold is whether this CPU and kernel run the assembly: AVX-512
// (foundation, for the 512-bit registers and their XORs and extracts, which
// cpu reports only when the kernel saves their state), VPCLMULQDQ for the
// 512-bit products, PCLMULQDQ and AVX2 for the 128- and 256-bit steps, and
// SSE4.2 for the CRC32 instruction.
var useFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ &&
	cpu.X86.HasPCLMULQDQ && cpu.X86.HasAVX2 && cpu.X86.HasSSE42

// fold returns the unreflected CRC32C register after the n bytes at p,
// starting from the register c. n is a multiple of 16, at least 64.
//
//go:noescape
func fold(c uint32, p *byte, n int) uint32
