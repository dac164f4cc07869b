package crc32c

import (
	"hash/crc32"
	"math/bits"
)

// table is hash/crc32's Castagnoli table; MakeTable also selects its
// hardware path, which does the short buffers and the tails.
var table = crc32.MakeTable(crc32.Castagnoli)

// minFold is the shortest buffer the folding path takes. The assembly takes
// 64 bytes and up, but below 128 its chain of dependent folds is slower than
// hash/crc32 (96 bytes: 17.9 ns against 11.5; 128: 13.9 against 15.2).
const minFold = 128

// Checksum returns the CRC32C of p, as crc32.Checksum(p, Castagnoli table).
func Checksum(p []byte) uint32 { return Update(0, p) }

// Update returns the CRC32C of p appended to the data whose CRC32C is crc, as
// crc32.Update(crc, Castagnoli table, p).
func Update(crc uint32, p []byte) uint32 {
	if !useFold || len(p) < minFold {
		return crc32.Update(crc, table, p)
	}
	n := len(p) &^ 15
	// hash/crc32's register is inverted before and after; fold works on
	// the register itself.
	c := fold(^crc, nil, 0, nil, &p[0], n)
	return crc32.Update(^c, table, p[n:])
}

// CopyAfter copies src into pkt after its first hdr bytes and returns the
// CRC32C of pkt[:hdr+len(src)], header and copy together, as copy then
// Checksum would. Where the folding path runs it reads each byte once: the
// first 64-byte block is the header joined to src's first bytes by masked
// loads, and the rest of src is folded as it is stored into pkt (BenchmarkCopyAfter).
// pkt must hold hdr+len(src) bytes.
func CopyAfter(pkt []byte, hdr int, src []byte) uint32 {
	end := hdr + len(src)
	if end > len(pkt) || hdr < 0 {
		panic("crc32c: CopyAfter: the packet is shorter than header and payload")
	}
	if !useFold || hdr == 0 || hdr > 64 || end < minFold {
		copy(pkt[hdr:], src)
		return crc32.Update(0, table, pkt[:end])
	}
	n := end &^ 15 // header and payload folded; the rest is the tail
	c := fold(^uint32(0), &pkt[0], ^uint64(0)>>(64-hdr), &pkt[hdr], &src[0], n)
	copy(pkt[n:end], src[n-hdr:])
	return crc32.Update(^c, table, pkt[n:end])
}

// foldConsts holds the multipliers the assembly reads, in the order it
// reads them: pairs (k1, k2) for a fold over 256, 64 and 16 bytes, then the
// four lanes' pairs that fold a 64-byte accumulator into its last 16 bytes
// (48, 32 and 16 bytes, and zero for the last lane, which stays).
var foldConsts = [14]uint64{
	k(256 + 4), k(256 - 4),
	k(64 + 4), k(64 - 4),
	k(16 + 4), k(16 - 4),
	k(48 + 4), k(48 - 4), k(32 + 4), k(32 - 4), k(16 + 4), k(16 - 4), 0, 0,
}

// poly is the Castagnoli polynomial without its x^32 term, in normal
// (unreflected) bit order.
const poly = 0x1EDC6F41

// k returns x^(8·n) mod P, bit-reflected and shifted left by one.
// foldConsts calls it with n = D+4 and D-4 for a fold over D bytes, which
// gives the package doc's x^(8D+32) and x^(8D-32).
func k(n int) uint64 { return uint64(bits.Reverse32(xpow(8*n))) << 1 }

// xpow returns x^e mod P in normal bit order.
func xpow(e int) uint32 {
	r := uint32(1)
	for range e {
		carry := r >> 31
		r <<= 1
		if carry == 1 {
			r ^= poly
		}
	}
	return r
}
