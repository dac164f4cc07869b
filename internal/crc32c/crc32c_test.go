package crc32c

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// reference is the bytewise definition the fast path must equal.
func reference(crc uint32, p []byte) uint32 { return crc32.Update(crc, table, p) }

// TestMatchesHashCRC32 compares every length from 0 to 4 KiB, at every
// alignment of the first byte within a cache line, from zero and from a
// running CRC, and some long buffers that run the 256-byte loop many times.
func TestMatchesHashCRC32(t *testing.T) {
	if !useFold {
		t.Log("this CPU lacks AVX-512 VPCLMULQDQ: Update is hash/crc32's, compared with itself")
	}
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 64<<10+64)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	check := func(crc uint32, p []byte) {
		t.Helper()
		if got, want := Update(crc, p), reference(crc, p); got != want {
			t.Fatalf("Update(%#x, %d bytes at %p) = %#x, want %#x", crc, len(p), p, got, want)
		}
	}
	for n := 0; n <= 4096; n++ {
		off := n % 64
		check(0, buf[off:off+n])
		check(r.Uint32(), buf[off:off+n])
	}
	for _, n := range []int{8192, 9000, 16384 + 48, 64 << 10} {
		for off := range 64 {
			check(r.Uint32(), buf[off:off+n])
		}
	}
	if got := Checksum([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("check value %#x, want 0xe3069283 (RFC 3720 B.4's CRC32C of \"123456789\")", got)
	}
}

// TestChainsAcrossCalls: a CRC carried from one call to the next, with the
// split anywhere, gives the CRC of the whole.
func TestChainsAcrossCalls(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	p := make([]byte, 3000)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	want := Checksum(p)
	for split := 0; split <= len(p); split += 7 {
		if got := Update(Update(0, p[:split]), p[split:]); got != want {
			t.Fatalf("split at %d: %#x, want %#x", split, got, want)
		}
	}
}

// TestFoldConstants checks the multipliers against the definition the
// assembly relies on, in Go: folding a 16-byte block forward by D bytes with
// (k(D+4), k(D-4)) leaves the CRC register, run from zero, unchanged.
func TestFoldConstants(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, d := range []int{16, 32, 48, 64, 256} {
		for range 100 {
			msg := make([]byte, 16+d)
			for i := range msg {
				msg[i] = byte(r.Uint32())
			}
			lo, hi := binary.LittleEndian.Uint64(msg), binary.LittleEndian.Uint64(msg[8:])
			h1, l1 := clmul(lo, k(d+4))
			h2, l2 := clmul(hi, k(d-4))
			rest := append([]byte(nil), msg[16:]...)
			at := rest[d-16:]
			binary.LittleEndian.PutUint64(at, binary.LittleEndian.Uint64(at)^l1^l2)
			binary.LittleEndian.PutUint64(at[8:], binary.LittleEndian.Uint64(at[8:])^h1^h2)
			if got, want := register(rest), register(msg); got != want {
				t.Fatalf("fold over %d bytes: CRC %#x, want %#x", d, got, want)
			}
		}
	}
	i := 0
	for _, pair := range [][2]int{{256, 256}, {64, 64}, {16, 16}, {48, 48}, {32, 32}, {16, 16}} {
		if foldConsts[i] != k(pair[0]+4) || foldConsts[i+1] != k(pair[1]-4) {
			t.Fatalf("foldConsts[%d:%d] are not the pair for %d bytes", i, i+2, pair[0])
		}
		i += 2
	}
	if foldConsts[12] != 0 || foldConsts[13] != 0 {
		t.Fatal("the last lane's multipliers must be zero")
	}
}

// register is the CRC32C register run from zero over p, without the
// inversions before and after that the CRC32C itself has.
func register(p []byte) uint32 { return ^reference(^uint32(0), p) }

// clmul is the 64x64-bit carry-less product, done by shifts.
func clmul(a, b uint64) (hi, lo uint64) {
	for i := range 64 {
		if b>>i&1 == 1 {
			lo ^= a << i
			if i > 0 {
				hi ^= a >> (64 - i)
			}
		}
	}
	return hi, lo
}

// checkCopy runs CopyAfter with hdr bytes of header before src, at an
// offset in a poisoned buffer, and fails unless the CRC is that of header
// and src together, the copy is exact, the header is untouched, and no
// byte after the copy changed.
func checkCopy(t *testing.T, header, src []byte, off int) {
	t.Helper()
	const guard = 80 // more than a 64-byte store could overrun
	buf := make([]byte, off+len(header)+len(src)+guard)
	for i := range buf {
		buf[i] = 0xa5
	}
	pkt := buf[off:]
	copy(pkt, header)
	whole := append(append([]byte(nil), header...), src...)
	if got, want := CopyAfter(pkt, len(header), src), reference(0, whole); got != want {
		t.Fatalf("CopyAfter(%d-byte header, %d bytes, offset %d) = %#x, want %#x", len(header), len(src), off, got, want)
	}
	if !bytes.Equal(pkt[:len(whole)], whole) {
		t.Fatalf("%d-byte header, %d bytes, offset %d: the packet differs", len(header), len(src), off)
	}
	for i, b := range buf {
		if (i < off || i >= off+len(whole)) && b != 0xa5 {
			t.Fatalf("%d-byte header, %d bytes, offset %d: byte %d outside the packet changed", len(header), len(src), off, i-off)
		}
	}
}

// TestCopyAfter: headers of every length to 80 bytes (beyond the 64 the
// fold takes whole), every payload length to 4 KiB, packet and payload
// at different alignments, and long payloads, give the packet's CRC, an
// exact packet, and nothing written beyond it.
func TestCopyAfter(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	src := make([]byte, 64<<10+64)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	for n := 0; n <= 4096; n++ {
		h := n % 81
		checkCopy(t, src[1000:1000+h], src[n%64:n%64+n], (n*7)%64)
	}
	for h := 0; h <= 80; h++ {
		for _, n := range []int{0, 1, 63, 64, 127, 128, 191, 192, 193, 1400, 9000, 64 << 10} {
			checkCopy(t, src[2000:2000+h], src[h%64:h%64+n], 63-h%64)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a packet shorter than header and payload did not panic")
		}
	}()
	CopyAfter(make([]byte, 70), 60, src[:11])
}

func TestUpdateAllocatesNothing(t *testing.T) {
	p, q := make([]byte, 1464), make([]byte, 1464)
	if n := testing.AllocsPerRun(100, func() { Update(0, p) }); n != 0 {
		t.Fatalf("%v allocations per Update", n)
	}
	if n := testing.AllocsPerRun(100, func() { CopyAfter(q, 60, p[:1400]) }); n != 0 {
		t.Fatalf("%v allocations per CopyAfter", n)
	}
}

func FuzzUpdate(f *testing.F) {
	f.Add(uint32(0), []byte("123456789"), uint8(0))
	f.Add(uint32(0xffffffff), make([]byte, 300), uint8(17))
	f.Add(uint32(1), make([]byte, 1500), uint8(63))
	f.Fuzz(func(t *testing.T, crc uint32, p []byte, off uint8) {
		// off moves the start so alignment varies as well as length.
		buf := make([]byte, int(off%64)+len(p))
		q := buf[off%64:]
		copy(q, p)
		if got, want := Update(crc, q), reference(crc, q); got != want {
			t.Fatalf("Update(%#x, %d bytes) = %#x, want %#x", crc, len(q), got, want)
		}
		if len(q) >= 60 {
			checkCopy(t, q[:int(off)%61], q[int(off)%61:], int(off/64))
		}
	})
}

var sink uint32

func benchmark(b *testing.B, n int, f func(uint32, []byte) uint32) {
	p := make([]byte, n)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		sink = f(sink, p)
	}
}

// The sizes: an ack, a 1500-MTU data packet's CRC span, and a 9000-MTU one.
func BenchmarkUpdate64(b *testing.B)       { benchmark(b, 64, Update) }
func BenchmarkUpdate1464(b *testing.B)     { benchmark(b, 1464, Update) }
func BenchmarkUpdate8964(b *testing.B)     { benchmark(b, 8964, Update) }
func BenchmarkHashCRC32_64(b *testing.B)   { benchmark(b, 64, reference) }
func BenchmarkHashCRC32_1464(b *testing.B) { benchmark(b, 1464, reference) }
func BenchmarkHashCRC32_8964(b *testing.B) { benchmark(b, 8964, reference) }

// BenchmarkCopyAfter is a sender's 60-byte header and payload made into a
// packet with its CRC, in one pass and as copy then Checksum.
func BenchmarkCopyAfter(b *testing.B) {
	for _, n := range []int{1400, 8900} {
		src, pkt := make([]byte, n), make([]byte, 60+n)
		b.Run(fmt.Sprintf("fused/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				sink = CopyAfter(pkt, 60, src)
			}
		})
		b.Run(fmt.Sprintf("copy+checksum/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				copy(pkt[60:], src)
				sink = Checksum(pkt)
			}
		})
	}
}
