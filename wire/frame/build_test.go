package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

var (
	testMAC1 = [6]byte{0x02, 0, 0, 0, 0, 0x01}
	testMAC2 = [6]byte{0x02, 0, 0, 0, 0, 0x02}

	// 21 bytes: odd, so the UDP checksum covers a padded last word.
	testPayload = []byte("MetaRoCE odd payload.")

	testEP4 = Endpoints{
		SrcMAC: testMAC1, DstMAC: testMAC2,
		Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("198.51.100.2"),
		SrcPort: 0xd234, DstPort: 4791,
	}
	testEP6 = Endpoints{
		SrcMAC: testMAC1, DstMAC: testMAC2,
		Src: netip.MustParseAddr("2001:db8::1"), Dst: netip.MustParseAddr("2001:db8::2"),
		SrcPort: 0xd234, DstPort: 4791,
	}
)

// The known-good frames. They were produced independently of this package
// by scapy 2.5.0 (Debian python3-scapy) from the same field values, e.g.
//
//	Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") /
//	IP(src="192.0.2.1", dst="198.51.100.2", tos=26<<2|2, ttl=64, flags="DF", id=0) /
//	UDP(sport=0xd234, dport=4791) / Raw(b"MetaRoCE odd payload.")
//
// and their checksums are checked again below with refSum, RFC 1071's
// method, over a pseudo-header the test assembles byte by byte.
var (
	vector4 = strings.Join([]string{
		"020000000002", "020000000001", "0800", // dst MAC, src MAC, IPv4
		"45", "6a", "0031", // version 4 IHL 5, TOS = DSCP 26 (AF31) << 2 | ECN 2 (ECT(0)), total 49
		"0000", "4000", // ID 0, DF
		"40", "11", "4e1b", // TTL 64, UDP, header checksum
		"c0000201", "c6336402", // 192.0.2.1, 198.51.100.2
		"d234", "12b7", "001d", "d484", // ports 53812 -> 4791, length 29, checksum
		"4d657461526f4345206f6464207061796c6f61642e", // payload
	}, "")
	vector6 = strings.Join([]string{
		"020000000002", "020000000001", "86dd", // dst MAC, src MAC, IPv6
		"6b900000",         // version 6, TC = DSCP 46 (EF) << 2 | ECN 1 (ECT(1)) = 0xb9, flow 0
		"001d", "11", "40", // payload length 29, next header UDP, hop limit 64
		"20010db8000000000000000000000001", // 2001:db8::1
		"20010db8000000000000000000000002", // 2001:db8::2
		"d234", "12b7", "001d", "6547",     // ports, length 29, checksum
		"4d657461526f4345206f6464207061796c6f61642e",
	}, "")
	// Payloads tuned so that the computed UDP checksum is 0, which must be
	// sent as ffff (RFC 768). Same provenance (scapy) as above.
	vector4Zero = "020000000002020000000001" + "0800" +
		"450000220000400040114e94c0000201c6336402" +
		"00010002000effff" + "7a65726f26c3"
	vector6Zero = "020000000002020000000001" + "86dd" +
		"60000000000e1140" + "20010db8000000000000000000000001" + "20010db8000000000000000000000002" +
		"00010002000effff" + "7a65726fb785"
)

// build is Build+Finish into a fresh buffer of exactly the frame's size.
func build(t testing.TB, ep *Endpoints, dscp, ecn uint8, payload []byte) []byte {
	t.Helper()
	buf := make([]byte, HeaderLen(ep.Src.Is6())+len(payload))
	hl, err := Build(buf, ep, dscp, ecn, len(payload))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	copy(buf[hl:], payload)
	if err := Finish(buf); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	return buf
}

// pseudoHeader assembles the UDP pseudo-header field by field from the RFCs
// (RFC 768 for IPv4, RFC 8200 section 8.1 for IPv6), independently of the
// package's shortcut of summing the addresses in place.
func pseudoHeader(src, dst netip.Addr, udpLength int) []byte {
	var b []byte
	b = append(b, src.AsSlice()...)
	b = append(b, dst.AsSlice()...)
	if src.Is4() {
		b = append(b, 0, protoUDP)
		b = binary.BigEndian.AppendUint16(b, uint16(udpLength))
	} else {
		b = binary.BigEndian.AppendUint32(b, uint32(udpLength))
		b = append(b, 0, 0, 0, protoUDP)
	}
	return b
}

// checkChecksumsByRFC1071 verifies a frame's checksums with the oracle.
func checkChecksumsByRFC1071(t *testing.T, fr []byte) {
	t.Helper()
	var src, dst netip.Addr
	var seg []byte
	switch binary.BigEndian.Uint16(fr[12:]) {
	case etherTypeIPv4:
		ip := fr[14:34]
		if s := refSum(ip, 0); s != 0xffff {
			t.Errorf("IPv4 header sums to %#04x, want ffff", s)
		}
		src, dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		seg = fr[34:]
	case etherTypeIPv6:
		ip := fr[14:54]
		src, dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		seg = fr[54:]
	}
	ph := pseudoHeader(src, dst, len(seg))
	if s := refSum(seg, refSum(ph, 0)); s != 0xffff {
		t.Errorf("UDP pseudo-header and segment sum to %#04x, want ffff", s)
	}
	if binary.BigEndian.Uint16(seg[6:]) == 0 {
		t.Errorf("UDP checksum field is 0")
	}
}

func TestBuildVectors(t *testing.T) {
	zero4, zero6 := testEP4, testEP6
	zero4.SrcPort, zero4.DstPort = 1, 2
	zero6.SrcPort, zero6.DstPort = 1, 2
	for _, tc := range []struct {
		name      string
		ep        *Endpoints
		dscp, ecn uint8
		payload   []byte
		want      string
	}{
		{"ipv4", &testEP4, 26, 2, testPayload, vector4},
		{"ipv6", &testEP6, 46, 1, testPayload, vector6},
		{"ipv4-checksum-0", &zero4, 0, 0, []byte("zero\x26\xc3"), vector4Zero},
		{"ipv6-checksum-0", &zero6, 0, 0, []byte("zero\xb7\x85"), vector6Zero},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := build(t, tc.ep, tc.dscp, tc.ecn, tc.payload)
			want := mustHex(t, tc.want)
			if !bytes.Equal(got, want) {
				t.Errorf("frame\n got %x\nwant %x", got, want)
			}
			checkChecksumsByRFC1071(t, got)
		})
	}
}

func TestHeaderLen(t *testing.T) {
	if HeaderLen(false) != 42 || HeaderLen(true) != 62 || MaxHeaderLen != 62 {
		t.Fatalf("HeaderLen = %d, %d; MaxHeaderLen %d", HeaderLen(false), HeaderLen(true), MaxHeaderLen)
	}
}

// TestBuildInPlace is the dataplane's use: the payload is already in the
// buffer, at HeaderLen, inside a larger chunk whose tail is garbage.
func TestBuildInPlace(t *testing.T) {
	for _, ep := range []*Endpoints{&testEP4, &testEP6} {
		chunk := bytes.Repeat([]byte{0xa5}, 2048)
		hl := HeaderLen(ep.Src.Is6())
		copy(chunk[hl:], testPayload)
		n, err := Build(chunk, ep, 26, 2, len(testPayload))
		if err != nil || n != hl {
			t.Fatalf("Build = %d, %v; want %d, nil", n, err, hl)
		}
		if !bytes.Equal(chunk[hl:hl+len(testPayload)], testPayload) {
			t.Fatalf("Build touched the payload")
		}
		if err := Finish(chunk); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		if chunk[hl+len(testPayload)] != 0xa5 {
			t.Fatalf("Finish wrote past the frame")
		}
		want := build(t, ep, 26, 2, testPayload)
		if !bytes.Equal(chunk[:len(want)], want) {
			t.Fatalf("in-place frame\n got %x\nwant %x", chunk[:len(want)], want)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	mixed := testEP4
	mixed.Dst = testEP6.Dst
	invalid := testEP4
	invalid.Src = netip.Addr{}
	buf := make([]byte, 70000)
	for _, tc := range []struct {
		name       string
		buf        []byte
		ep         *Endpoints
		dscp, ecn  uint8
		payloadLen int
		want       error
	}{
		{"dscp", buf, &testEP4, 64, 0, 10, ErrBadDSCP},
		{"ecn", buf, &testEP4, 0, 4, 10, ErrBadECN},
		{"mixed-family", buf, &mixed, 0, 0, 10, ErrAddrFamily},
		{"invalid-addr", buf, &invalid, 0, 0, 10, ErrAddrFamily},
		{"negative-payload", buf, &testEP4, 0, 0, -1, ErrPayloadTooLarge},
		{"v4-payload-max", buf, &testEP4, 0, 0, MaxPayload4, nil},
		{"v4-payload-too-large", buf, &testEP4, 0, 0, MaxPayload4 + 1, ErrPayloadTooLarge},
		{"v6-payload-max", buf, &testEP6, 0, 0, MaxPayload6, nil},
		{"v6-payload-too-large", buf, &testEP6, 0, 0, MaxPayload6 + 1, ErrPayloadTooLarge},
		{"v4-short", make([]byte, HeaderLen4+9), &testEP4, 0, 0, 10, ErrShortBuffer},
		{"v4-exact", make([]byte, HeaderLen4+10), &testEP4, 0, 0, 10, nil},
		{"v6-short", make([]byte, HeaderLen6+9), &testEP6, 0, 0, 10, ErrShortBuffer},
		{"v6-exact", make([]byte, HeaderLen6+10), &testEP6, 0, 0, 10, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(tc.buf, tc.ep, tc.dscp, tc.ecn, tc.payloadLen)
			if err != tc.want {
				t.Fatalf("Build: %v, want %v", err, tc.want)
			}
			if err == nil {
				if err := Finish(tc.buf); err != nil {
					t.Fatalf("Finish: %v", err)
				}
			}
		})
	}
}

func TestFinishErrors(t *testing.T) {
	good4 := build(t, &testEP4, 0, 0, testPayload)
	good6 := build(t, &testEP6, 0, 0, testPayload)
	mod := func(b []byte, f func(b []byte)) []byte {
		b = bytes.Clone(b)
		f(b)
		return b
	}
	for _, tc := range []struct {
		name string
		buf  []byte
		want error
	}{
		{"empty", nil, ErrShortBuffer},
		{"no-ethertype", good4[:13], ErrShortBuffer},
		{"arp", mod(good4, func(b []byte) { b[12], b[13] = 0x08, 0x06 }), ErrNotBuilt},
		{"v4-short-header", good4[:HeaderLen4-1], ErrShortBuffer},
		{"v4-options", mod(good4, func(b []byte) { b[14] = 0x46 }), ErrNotBuilt},
		{"v4-version", mod(good4, func(b []byte) { b[14] = 0x65 }), ErrNotBuilt},
		{"v4-proto", mod(good4, func(b []byte) { b[14+9] = 6 }), ErrNotBuilt},
		{"v4-length-mismatch", mod(good4, func(b []byte) { b[14+3]++ }), ErrNotBuilt},
		{"v4-udp-length-below-8", mod(good4, func(b []byte) { b[14+3] = 20 + 7; b[34+5] = 7 }), ErrNotBuilt},
		{"v4-truncated-payload", good4[:len(good4)-1], ErrShortBuffer},
		{"v6-short-header", good6[:HeaderLen6-1], ErrShortBuffer},
		{"v6-version", mod(good6, func(b []byte) { b[14] = 0x4b }), ErrNotBuilt},
		{"v6-next-header", mod(good6, func(b []byte) { b[14+6] = 0 }), ErrNotBuilt},
		{"v6-length-mismatch", mod(good6, func(b []byte) { b[14+5]++ }), ErrNotBuilt},
		{"v6-truncated-payload", good6[:len(good6)-1], ErrShortBuffer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := bytes.Clone(tc.buf)
			if err := Finish(tc.buf); !errors.Is(err, tc.want) {
				t.Fatalf("Finish: %v, want %v", err, tc.want)
			}
			if !bytes.Equal(before, tc.buf) {
				t.Fatalf("Finish modified a buffer it rejected")
			}
		})
	}
}

// TestFinishIdempotent: a second Finish (say, after a retransmission path
// rewrites nothing) leaves the frame as it was.
func TestFinishIdempotent(t *testing.T) {
	for _, ep := range []*Endpoints{&testEP4, &testEP6} {
		b := build(t, ep, 10, 3, testPayload)
		again := bytes.Clone(b)
		if err := Finish(again); err != nil || !bytes.Equal(again, b) {
			t.Fatalf("second Finish: %v, %x != %x", err, again, b)
		}
	}
}

// TestFinishAfterPayloadChange: the checksum follows the payload, which is
// what lets the dataplane write the payload after Build.
func TestFinishAfterPayloadChange(t *testing.T) {
	for _, ep := range []*Endpoints{&testEP4, &testEP6} {
		b := build(t, ep, 0, 0, testPayload)
		b[len(b)-1] ^= 0x40
		var f Frame
		if err := Parse(b, &f); err != ErrBadUDPChecksum {
			t.Fatalf("changed payload without Finish: %v, want ErrBadUDPChecksum", err)
		}
		if err := Finish(b); err != nil {
			t.Fatal(err)
		}
		if err := Parse(b, &f); err != nil {
			t.Fatalf("after Finish: %v", err)
		}
	}
}
