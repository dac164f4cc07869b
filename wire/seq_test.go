package wire_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/wire"
)

func TestPSNWrap(t *testing.T) {
	tests := []struct {
		p, q          wire.PSN
		before, after bool
		dist          int32
	}{
		{0, 0, false, false, 0},
		{0, 1, true, false, 1},
		{1, 0, false, true, -1},
		{0xffffffff, 0, true, false, 1},
		{0, 0xffffffff, false, true, -1},
		{0xfffffff0, 0x10, true, false, 0x20},
		{0x10, 0xfffffff0, false, true, -0x20},
		{0, 0x7fffffff, true, false, math.MaxInt32},
		{0x7fffffff, 0, false, true, -math.MaxInt32},
		{0x7fffffff, 0x80000000, true, false, 1},
		{0x80000000, 0x7fffffff, false, true, -1},
		{0x80000001, 0, true, false, math.MaxInt32},
		{0xffffffff, 0x7ffffffe, true, false, math.MaxInt32},
		// Exactly 2^31 apart the order is undefined (RFC 1982 §3.2):
		// neither comes first, and the distance is MinInt32 both ways.
		{0, 0x80000000, false, false, math.MinInt32},
		{0x80000000, 0, false, false, math.MinInt32},
		{0x12345678, 0x92345678, false, false, math.MinInt32},
	}
	for _, tt := range tests {
		if got := tt.p.Before(tt.q); got != tt.before {
			t.Errorf("%#x.Before(%#x) = %v", uint32(tt.p), uint32(tt.q), got)
		}
		if got := tt.p.After(tt.q); got != tt.after {
			t.Errorf("%#x.After(%#x) = %v", uint32(tt.p), uint32(tt.q), got)
		}
		if got := tt.p.Distance(tt.q); got != tt.dist {
			t.Errorf("%#x.Distance(%#x) = %d, want %d", uint32(tt.p), uint32(tt.q), got, tt.dist)
		}
		if tt.p.Before(tt.q) != tt.q.After(tt.p) {
			t.Errorf("%#x.Before(%#x) disagrees with the converse After", uint32(tt.p), uint32(tt.q))
		}
	}
	for _, tt := range []struct {
		p    wire.PSN
		n    int
		want wire.PSN
	}{
		{0xffffffff, 1, 0},
		{0, -1, 0xffffffff},
		{5, -10, 0xfffffffb},
		{0xfffffff0, 0x20, 0x10},
		{7, 1 << 32, 7},
		{7, 0, 7},
	} {
		if got := tt.p.Add(tt.n); got != tt.want {
			t.Errorf("%#x.Add(%d) = %#x, want %#x", uint32(tt.p), tt.n, uint32(got), uint32(tt.want))
		}
	}
}

// TestPSNMatchesInt64 checks serial arithmetic against plain int64
// arithmetic: for two counters a and b less than 2^31 apart, the PSNs
// taken mod 2^32 must order and subtract as a and b do, whatever the wrap.
func TestPSNMatchesInt64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const span = 1<<31 - 1
	for i := 0; i < 200000; i++ {
		a := rng.Int64N(1 << 40)
		var d int64
		switch i % 4 {
		case 0:
			d = rng.Int64N(2*span+1) - span // anywhere in the valid range
		case 1:
			d = rng.Int64N(129) - 64 // near: the common case
		case 2:
			d = span - rng.Int64N(64) // at the edge
		case 3:
			d = -span + rng.Int64N(64)
		}
		if i%5 == 0 {
			a = 1<<32*rng.Int64N(1<<8) - rng.Int64N(64) // just below a wrap
		}
		b := a + d
		p, q := wire.PSN(uint32(a)), wire.PSN(uint32(b))
		if got := p.Distance(q); int64(got) != d {
			t.Fatalf("a=%d b=%d: Distance = %d, want %d", a, b, got, d)
		}
		if got := q.Distance(p); int64(got) != -d {
			t.Fatalf("a=%d b=%d: reverse Distance = %d, want %d", a, b, got, -d)
		}
		if p.Before(q) != (a < b) || p.After(q) != (a > b) {
			t.Fatalf("a=%d b=%d: Before %v After %v", a, b, p.Before(q), p.After(q))
		}
		if p.Add(int(d)) != q {
			t.Fatalf("a=%d: Add(%d) = %#x, want %#x", a, d, uint32(p.Add(int(d))), uint32(q))
		}
	}
}
