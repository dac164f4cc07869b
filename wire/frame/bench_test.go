package frame

import (
	"strconv"
	"testing"
)

var benchCases = []struct {
	family string
	ep     *Endpoints
}{
	{"ipv4", &testEP4},
	{"ipv6", &testEP6},
}

var benchSizes = []int{64, 1400}

// BenchmarkBuildFinish is the TX cost per packet once the transport has
// written its packet into the chunk: headers plus both checksums.
func BenchmarkBuildFinish(b *testing.B) {
	for _, c := range benchCases {
		for _, n := range benchSizes {
			b.Run(c.family+"/"+strconv.Itoa(n), func(b *testing.B) {
				buf := make([]byte, 2048)
				for i := range buf {
					buf[i] = byte(i)
				}
				b.SetBytes(int64(HeaderLen(c.ep.Src.Is6()) + n))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Build(buf, c.ep, 26, 2, n); err != nil {
						b.Fatal(err)
					}
					if err := Finish(buf); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkParse is the RX cost per packet with full verification, and
// with the UDP checksum skipped.
func BenchmarkParse(b *testing.B) {
	for _, skip := range []bool{false, true} {
		name := "verify"
		if skip {
			name = "skipudp"
		}
		p := Parser{SkipUDPChecksum: skip}
		for _, c := range benchCases {
			for _, n := range benchSizes {
				b.Run(name+"/"+c.family+"/"+strconv.Itoa(n), func(b *testing.B) {
					buf := make([]byte, HeaderLen(c.ep.Src.Is6())+n)
					for i := range buf {
						buf[i] = byte(i)
					}
					if _, err := Build(buf, c.ep, 26, 2, n); err != nil {
						b.Fatal(err)
					}
					if err := Finish(buf); err != nil {
						b.Fatal(err)
					}
					b.SetBytes(int64(len(buf)))
					b.ReportAllocs()
					var f Frame
					for b.Loop() {
						if err := p.Parse(buf, &f); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkParseDrop is the cost of refusing a frame that fails its last
// check, to show that the error path does not allocate either.
func BenchmarkParseDrop(b *testing.B) {
	buf := build(b, &testEP4, 0, 0, make([]byte, 64))
	buf[len(buf)-1] ^= 1
	b.ReportAllocs()
	var f Frame
	var drops [NumReasons]uint64
	for b.Loop() {
		if err := Parse(buf, &f); err != nil {
			drops[err.(Reason)]++
		}
	}
	if drops[ErrBadUDPChecksum] == 0 {
		b.Fatal("no drops counted")
	}
}
