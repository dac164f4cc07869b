package frame

import (
	"bytes"
	"net/netip"
	"testing"
)

// TestFinishV4NoUDPChecksum: IPv4 frames get a zero UDP checksum and a
// valid IP header checksum, and parse; IPv6 frames come out exactly as
// Finish makes them (the checksum is mandatory there).
func TestFinishV4NoUDPChecksum(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		ep := Endpoints{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
			Src: netip.MustParseAddr("10.1.2.3"), Dst: netip.MustParseAddr("10.4.5.6"), SrcPort: 50001, DstPort: 4792}
		if v6 {
			ep.Src, ep.Dst = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
		}
		payload := bytes.Repeat([]byte{0xa5, 0x5a, 0x01}, 300)
		mk := func(fin func([]byte) error) []byte {
			buf := make([]byte, HeaderLen(v6)+len(payload))
			copy(buf[HeaderLen(v6):], payload)
			if _, err := Build(buf, &ep, 26, 2, len(payload)); err != nil {
				t.Fatal(err)
			}
			if err := fin(buf); err != nil {
				t.Fatal(err)
			}
			return buf
		}
		full, lite := mk(Finish), mk(FinishV4NoUDPChecksum)
		csum := HeaderLen(v6) - 2
		if v6 {
			if !bytes.Equal(full, lite) {
				t.Fatal("IPv6: FinishV4NoUDPChecksum differs from Finish")
			}
		} else if lite[csum] != 0 || lite[csum+1] != 0 || !bytes.Equal(full[:csum], lite[:csum]) {
			t.Fatalf("IPv4: want headers equal to Finish's but a zero UDP checksum, got % x", lite[:HeaderLen(false)])
		}
		var f Frame
		if err := Parse(lite, &f); err != nil || !bytes.Equal(f.Payload, payload) {
			t.Fatalf("v6=%v: parse %v", v6, err)
		}
	}
}
