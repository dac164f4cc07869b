package frame

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"
)

func randEndpoints(r *rand.Rand, is6 bool) Endpoints {
	var ep Endpoints
	for i := range ep.SrcMAC {
		ep.SrcMAC[i], ep.DstMAC[i] = byte(r.Uint32()), byte(r.Uint32())
	}
	if is6 {
		var a, b [16]byte
		for i := range a {
			a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		ep.Src, ep.Dst = netip.AddrFrom16(a), netip.AddrFrom16(b)
	} else {
		var a, b [4]byte
		for i := range a {
			a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		ep.Src, ep.Dst = netip.AddrFrom4(a), netip.AddrFrom4(b)
	}
	ep.SrcPort, ep.DstPort = uint16(r.Uint32()), uint16(r.Uint32())
	return ep
}

// TestRoundTripRandom: whatever Build writes, Parse reads back unchanged,
// the checksums agree with the RFC 1071 oracle, and whatever lies past the
// frame in the buffer (padding, a UMEM chunk's leftovers) is ignored.
func TestRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	buf := make([]byte, MaxHeaderLen+2000+64)
	for i := 0; i < 3000; i++ {
		is6 := r.IntN(2) == 1
		ep := randEndpoints(r, is6)
		dscp, ecn := uint8(r.IntN(64)), uint8(r.IntN(4))
		n := r.IntN(2000)
		if i < 100 {
			n = i // every small length, odd and even
		}
		tail := r.IntN(65)
		for j := range buf {
			buf[j] = byte(r.Uint32())
		}
		hl := HeaderLen(is6)
		payload := bytes.Clone(buf[hl : hl+n])
		fr := buf[:hl+n+tail]
		if got, err := Build(fr, &ep, dscp, ecn, n); err != nil || got != hl {
			t.Fatalf("Build = %d, %v", got, err)
		}
		if err := Finish(fr); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		checkChecksumsByRFC1071(t, fr[:hl+n])

		var f Frame
		if err := Parse(fr, &f); err != nil {
			t.Fatalf("case %d (is6 %v, n %d, tail %d): Parse: %v", i, is6, n, tail, err)
		}
		if f.Endpoints != ep || f.Is6 != is6 || f.DSCP != dscp || f.ECN != ecn || f.HasVLAN {
			t.Fatalf("case %d: parsed %+v, built from %+v dscp %d ecn %d", i, f, ep, dscp, ecn)
		}
		if !bytes.Equal(f.Payload, payload) {
			t.Fatalf("case %d: payload differs", i)
		}
	}
}

// TestSingleBitErrorsDetected flips every bit that a checksum covers and
// expects every flip to be refused. On IPv6 the traffic class, flow label
// and hop limit are covered by nothing and are left out.
func TestSingleBitErrorsDetected(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, is6 := range []bool{false, true} {
		for k := 0; k < 4; k++ {
			ep := randEndpoints(r, is6)
			payload := make([]byte, 1+r.IntN(100))
			for i := range payload {
				payload[i] = byte(r.Uint32())
			}
			fr := build(t, &ep, uint8(r.IntN(64)), uint8(r.IntN(4)), payload)
			start := ethLen
			if is6 {
				start = ethLen + ipv6PayloadLen
			}
			for i := start; i < len(fr); i++ {
				if is6 && i == ethLen+ipv6HopLimit {
					continue
				}
				for bit := 0; bit < 8; bit++ {
					fr[i] ^= 1 << bit
					var f Frame
					err := Parse(fr, &f)
					// On IPv4 a checksum field with one bit set can
					// flip to 0, "no checksum": the one blind spot.
					csumOff := HeaderLen(is6) - 2
					blind := !is6 && (i == csumOff || i == csumOff+1) && fr[csumOff] == 0 && fr[csumOff+1] == 0
					if err == nil && !blind {
						t.Fatalf("is6 %v: flipping byte %d bit %d went unnoticed", is6, i, bit)
					}
					fr[i] ^= 1 << bit
				}
			}
			var f Frame
			if err := Parse(fr, &f); err != nil {
				t.Fatalf("frame not restored: %v", err)
			}
		}
	}
}

// TestNoAllocs holds the hot path to its promise in the ordinary test run,
// not only in benchmarks.
func TestNoAllocs(t *testing.T) {
	for _, ep := range []*Endpoints{&testEP4, &testEP6} {
		buf := make([]byte, 2048)
		bad := build(t, ep, 0, 0, testPayload)
		bad[len(bad)-1] ^= 1
		var f Frame
		var sink error
		n := testing.AllocsPerRun(100, func() {
			if _, err := Build(buf, ep, 26, 2, 1400); err != nil {
				t.Fatal(err)
			}
			if err := Finish(buf); err != nil {
				t.Fatal(err)
			}
			if err := Parse(buf, &f); err != nil {
				t.Fatal(err)
			}
			sink = Parse(bad, &f) // the error path boxes a Reason
		})
		if n != 0 {
			t.Errorf("%v: %v allocs per Build+Finish+Parse", ep.Src, n)
		}
		if sink != ErrBadUDPChecksum {
			t.Errorf("error path: %v", sink)
		}
	}
}
