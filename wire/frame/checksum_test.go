package frame

import (
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"testing"
)

// refSum is RFC 1071's method spelled out as plainly as possible: add
// big-endian 16-bit words into a wide accumulator, pad an odd last byte
// with zero, fold the carries back in. It is the oracle the fast Sum is
// checked against, and it is deliberately not clever.
func refSum(b []byte, initial uint16) uint16 {
	s := uint64(initial)
	for i := 0; i+1 < len(b); i += 2 {
		s += uint64(b[i])<<8 | uint64(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint64(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex in test: %v", err)
	}
	return b
}

func TestSumPublishedVectors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want uint16
	}{
		// RFC 1071 section 3, the worked example: the sum of
		// 0001 f203 f4f5 f6f7 is ddf2.
		{"rfc1071", "0001f203f4f5f6f7", 0xddf2},
		// The IPv4 header used as the example in most textbooks (and
		// Wikipedia's "IPv4 header checksum" article), checksum b861
		// in place: a correct header sums to ffff.
		{"ipv4-header", "45000073000040004011b861c0a80001c0a800c7", 0xffff},
		// The same header with its checksum zeroed sums to ^b861.
		{"ipv4-header-zeroed", "450000730000400040110000c0a80001c0a800c7", ^uint16(0xb861)},
		// An odd length: the last byte is the high half of a word, so
		// ddf2 + ff00 = 1dcf2, folded dcf3.
		{"odd", "0001f203f4f5f6f7ff", 0xdcf3},
		{"empty", "", 0},
		{"all-ones", "ffffffffffffffffffffffffffffffff", 0xffff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustHex(t, tc.in)
			if got := Sum(b, 0); got != tc.want {
				t.Errorf("Sum = %#04x, want %#04x", got, tc.want)
			}
			if got := refSum(b, 0); got != tc.want {
				t.Errorf("refSum = %#04x, want %#04x (the oracle is wrong)", got, tc.want)
			}
		})
	}
}

// TestSumMatchesReference covers every tail length and alignment of the
// unrolled loops, with initial values that force carries.
func TestSumMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	ones := make([]byte, 300)
	for i := range ones {
		ones[i] = 0xff
	}
	for _, src := range [][]byte{buf, ones, make([]byte, 300)} {
		for off := 0; off < 9; off++ {
			for n := 0; n+off <= 300; n++ {
				b := src[off : off+n]
				for _, init := range []uint16{0, 1, 0x7fff, 0xfffe, 0xffff, uint16(r.Uint32())} {
					if got, want := Sum(b, init), refSum(b, init); got != want {
						t.Fatalf("off %d len %d init %#x: Sum %#04x, ref %#04x", off, n, init, got, want)
					}
				}
			}
		}
	}
	// Long buffers exercise many end-around carries through the chain.
	for n := 1000; n <= len(buf); n += 333 {
		if got, want := Sum(buf[:n], 0), refSum(buf[:n], 0); got != want {
			t.Fatalf("len %d: Sum %#04x, ref %#04x", n, got, want)
		}
	}
}

func TestSumChains(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 200)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for split := 0; split <= len(b); split += 2 {
		if got, want := Sum(b[split:], Sum(b[:split], 0)), Sum(b, 0); got != want {
			t.Fatalf("split %d: chained %#04x, whole %#04x", split, got, want)
		}
	}
}

func FuzzSum(f *testing.F) {
	f.Add([]byte{}, uint16(0))
	f.Add([]byte{0xff, 0xff, 0xff}, uint16(0xffff))
	f.Add(mustHex(f, "45000073000040004011b861c0a80001c0a800c7"), uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, init uint16) {
		if got, want := Sum(b, init), refSum(b, init); got != want {
			t.Fatalf("Sum %#04x, ref %#04x", got, want)
		}
	})
}

func BenchmarkSum(b *testing.B) {
	buf := make([]byte, 9000)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for _, n := range []int{20, 64, 1400, 9000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var s uint16
			for b.Loop() {
				s = Sum(buf[:n], s)
			}
		})
	}
}

// BenchmarkSumReference is the 16-bit-at-a-time oracle, for comparison.
func BenchmarkSumReference(b *testing.B) {
	buf := make([]byte, 1400)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var s uint16
	for b.Loop() {
		s = refSum(buf, s)
	}
}
