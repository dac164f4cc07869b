// Package crc32c computes the CRC32C (Castagnoli) that seals every MetaRoCE
// packet (docs/spec.md §2.1) faster than hash/crc32 on the data packets the
// transport sends, on amd64 hosts with AVX-512 carry-less
// multiplication (VPCLMULQDQ): 2.5 times at 1464 bytes, 2.2 times at 8964.
//
// Why it is written here: hash/crc32 runs Castagnoli on amd64 with the SSE4.2
// CRC32 instruction only, three streams of 168 bytes interleaved, and one
// stream for what is left; that is 85-100 ns for a 1464-byte packet, more
// than half of the 150 ns an engine may spend on a packet (issue 16). Its
// VPCLMULQDQ path exists for the IEEE polynomial only, and the other Go
// modules for CRC32C (klauspost/crc32 among them) run the same SSE4.2 code.
// The figures are in docs/platform.md.
//
// The mechanism is folding (a message's CRC depends on the message only
// modulo the polynomial P): a 16-byte block X that lies D bytes before block
// Y can be replaced by X·x^(8D) mod P added into Y without changing the CRC.
// With X = H·x^64 + L in the bit-reflected order CRC32C uses, that product
// is L·k1 + H·k2, two 64x33-bit carry-less products, where
// k1 = x^(8D+32) mod P and k2 = x^(8D-32) mod P, each bit-reflected and
// shifted left by one (the shift aligns the reflected 127-bit product; the
// exponents were found and are checked by TestFoldConstants against the
// bytewise CRC). VPCLMULQDQ forms four such products per instruction, one
// per 128-bit lane, so the loop keeps four 64-byte accumulators and folds
// 256 bytes per iteration, then folds the accumulators into one 16-byte
// block. That block's CRC is then two CRC32 instructions, and hash/crc32
// finishes the last 0-15 bytes. The caller's CRC enters by linearity: the
// unreflected CRC register c over message M equals the CRC from zero over M
// with c added into its first four bytes.
//
// CopyAfter is the sender's variant: the payload is folded as it is
// copied into the frame after its header (the fold's loads are stored as
// well), and the header, already in the frame, joins the payload's first
// bytes in the first 64-byte block through AVX-512 byte-masked loads, whose
// masked-off bytes are neither read nor able to fault. One pass over the
// payload instead of a copy and a second pass to checksum it.
//
// Other CPUs, and buffers under 128 bytes, take hash/crc32.
package crc32c
