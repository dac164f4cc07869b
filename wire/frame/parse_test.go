package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// fixIPv4 recomputes the IPv4 header checksum of the header at fr[off:],
// using the oracle, so that a test that edits a header field reaches the
// check it means to reach rather than the checksum.
func fixIPv4(fr []byte, off int) []byte {
	hl := int(fr[off]&0x0f) * 4
	h := fr[off : off+hl]
	h[10], h[11] = 0, 0
	binary.BigEndian.PutUint16(h[10:], ^refSum(h, 0))
	return fr
}

// fixUDP recomputes the UDP checksum of fr by the oracle, for a frame whose
// IP header starts at off and whose UDP header is at udpOff.
func fixUDP(fr []byte, off, udpOff int) []byte {
	seg := fr[udpOff:]
	seg = seg[:binary.BigEndian.Uint16(seg[4:])]
	var ph []byte
	if fr[off]>>4 == 4 {
		ph = pseudoHeader(ipv4(fr[off:]).src(), ipv4(fr[off:]).dst(), len(seg))
	} else {
		ph = pseudoHeader(ipv6(fr[off:]).src(), ipv6(fr[off:]).dst(), len(seg))
	}
	seg[6], seg[7] = 0, 0
	c := ^refSum(seg, refSum(ph, 0))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(seg[6:], c)
	return fr
}

func withVLAN(fr []byte, tci uint16, inner uint16) []byte {
	out := append([]byte{}, fr[:12]...)
	out = binary.BigEndian.AppendUint16(out, etherTypeVLAN)
	out = binary.BigEndian.AppendUint16(out, tci)
	out = binary.BigEndian.AppendUint16(out, inner)
	return append(out, fr[14:]...)
}

// withIPv4Options inserts opts (a multiple of 4 bytes) after the fixed
// IPv4 header and fixes IHL, total length and the header checksum. The UDP
// checksum is unchanged: the pseudo-header does not cover options.
func withIPv4Options(fr []byte, opts []byte) []byte {
	out := append([]byte{}, fr[:34]...)
	out = append(out, opts...)
	out = append(out, fr[34:]...)
	out[14] = 0x40 | byte(5+len(opts)/4)
	binary.BigEndian.PutUint16(out[16:], uint16(binary.BigEndian.Uint16(out[16:])+uint16(len(opts))))
	return fixIPv4(out, 14)
}

func mod(b []byte, f func(b []byte) []byte) []byte { return f(bytes.Clone(b)) }

func TestParseVectors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		frame     string
		ep        Endpoints
		is6       bool
		dscp, ecn uint8
	}{
		{"ipv4", vector4, testEP4, false, 26, 2},
		{"ipv6", vector6, testEP6, true, 46, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := mustHex(t, tc.frame)
			var f Frame
			if err := Parse(fr, &f); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if f.Endpoints != tc.ep || f.Is6 != tc.is6 || f.DSCP != tc.dscp || f.ECN != tc.ecn || f.HasVLAN {
				t.Errorf("parsed %+v", f)
			}
			if !bytes.Equal(f.Payload, testPayload) {
				t.Errorf("payload %q", f.Payload)
			}
			if &f.Payload[0] != &fr[HeaderLen(tc.is6)] {
				t.Errorf("payload does not alias the frame")
			}
		})
	}
}

// TestParseAccepts covers the frames that are not what Build writes but
// must be accepted all the same.
func TestParseAccepts(t *testing.T) {
	v4 := mustHex(t, vector4)
	v6 := mustHex(t, vector6)
	for _, tc := range []struct {
		name   string
		frame  []byte
		parser Parser
		check  func(t *testing.T, f *Frame)
	}{
		{name: "ethernet-padding-v4", frame: append(bytes.Clone(v4), make([]byte, 17)...)},
		{name: "ethernet-padding-v6", frame: append(bytes.Clone(v6), 0xee, 0xee)},
		{
			name:  "vlan-v4",
			frame: withVLAN(v4, 0x3005, etherTypeIPv4),
			check: func(t *testing.T, f *Frame) {
				if !f.HasVLAN || f.VLANTCI != 0x3005 {
					t.Errorf("VLAN %v %#x", f.HasVLAN, f.VLANTCI)
				}
			},
		},
		{
			name:  "vlan-v6",
			frame: withVLAN(v6, 0x0fff, etherTypeIPv6),
			check: func(t *testing.T, f *Frame) {
				if !f.HasVLAN || f.VLANTCI != 0x0fff || !f.Is6 {
					t.Errorf("VLAN %v %#x is6 %v", f.HasVLAN, f.VLANTCI, f.Is6)
				}
			},
		},
		// Router alert (RFC 2113) then end of options: IHL 6.
		{name: "ipv4-options", frame: withIPv4Options(v4, []byte{0x94, 0x04, 0x00, 0x00})},
		{name: "ipv4-max-options", frame: withIPv4Options(v4, make([]byte, 40))},
		{
			// Trailing bytes inside the IP packet but past the UDP
			// length: ignored, as Linux ignores them.
			name: "udp-shorter-than-ip",
			frame: mod(v4, func(b []byte) []byte {
				b = append(b, 1, 2, 3, 4)
				binary.BigEndian.PutUint16(b[16:], binary.BigEndian.Uint16(b[16:])+4)
				return fixIPv4(b, 14)
			}),
		},
		{
			name:  "ipv4-zero-udp-checksum",
			frame: mod(v4, func(b []byte) []byte { b[40], b[41] = 0, 0; return b }),
		},
		{
			name:   "skip-udp-checksum-v4",
			frame:  mod(v4, func(b []byte) []byte { b[41] ^= 1; return b }),
			parser: Parser{SkipUDPChecksum: true},
		},
		{
			name:   "skip-udp-checksum-v6-zero",
			frame:  mod(v6, func(b []byte) []byte { b[60], b[61] = 0, 0; return b }),
			parser: Parser{SkipUDPChecksum: true},
		},
		{
			// IPv4 DF clear, an ID, the evil bit, odd TTL: not ours to judge.
			name: "ipv4-other-fields",
			frame: mod(v4, func(b []byte) []byte {
				b[18], b[19] = 0x12, 0x34
				b[20], b[21] = 0x80, 0
				b[22] = 1
				return fixIPv4(b, 14)
			}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Frame
			if err := tc.parser.Parse(tc.frame, &f); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !bytes.Equal(f.Payload, testPayload) {
				t.Errorf("payload %q, want %q", f.Payload, testPayload)
			}
			want := testEP4
			if f.Is6 {
				want = testEP6
			}
			if f.Endpoints != want {
				t.Errorf("endpoints %+v", f.Endpoints)
			}
			if tc.check != nil {
				tc.check(t, &f)
			}
		})
	}
}

// TestParseErrors has at least one case for every Reason.
func TestParseErrors(t *testing.T) {
	v4 := mustHex(t, vector4)
	v6 := mustHex(t, vector6)
	set16 := func(off int, v uint16) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint16(b[off:], v); return b }
	}
	then := func(fs ...func([]byte) []byte) func([]byte) []byte {
		return func(b []byte) []byte {
			for _, f := range fs {
				b = f(b)
			}
			return b
		}
	}
	fix4 := func(b []byte) []byte { return fixIPv4(b, 14) }
	for _, tc := range []struct {
		name  string
		frame []byte
		want  Reason
	}{
		{"empty", nil, ErrTooShort},
		{"short-ethernet", v4[:13], ErrTooShort},
		{"short-vlan", withVLAN(v4, 1, etherTypeIPv4)[:17], ErrTooShort},
		{"short-ipv4", v4[:14+19], ErrTooShort},
		{"short-ipv4-options", mod(v4[:14+23], then(func(b []byte) []byte { b[14] = 0x46; return b })), ErrTooShort},
		{"short-ipv6", v6[:14+39], ErrTooShort},
		{"short-udp-v4", mod(v4, then(set16(16, 20+7), fix4)), ErrTooShort},
		{"short-udp-v6", mod(v6, set16(18, 7)), ErrTooShort},

		{"arp", mod(v4, set16(12, 0x0806)), ErrNotIP},
		{"ieee802.3-length", mod(v4, set16(12, 0x05dc)), ErrNotIP},
		{"qinq", withVLAN(withVLAN(v4, 1, etherTypeIPv4), 2, etherTypeVLAN), ErrNotIP},
		{"802.1ad", mod(withVLAN(v4, 1, etherTypeIPv4), set16(12, 0x88a8)), ErrNotIP},
		{"vlan-arp", withVLAN(v4, 1, 0x0806), ErrNotIP},

		{"ipv4-version-6", mod(v4, func(b []byte) []byte { b[14] = 0x65; return b }), ErrBadIPHeader},
		{"ipv4-ihl-4", mod(v4, func(b []byte) []byte { b[14] = 0x44; return b }), ErrBadIPHeader},
		{"ipv4-ihl-0", mod(v4, func(b []byte) []byte { b[14] = 0x40; return b }), ErrBadIPHeader},
		{"ipv6-version-4", mod(v6, func(b []byte) []byte { b[14] = 0x4b; return b }), ErrBadIPHeader},
		{"ipv6-in-ipv4-ethertype", mod(v6, set16(12, etherTypeIPv4)), ErrBadIPHeader},

		{"ipv4-checksum", mod(v4, func(b []byte) []byte { b[22]--; return b }), ErrBadIPChecksum},
		{"ipv4-checksum-field", mod(v4, func(b []byte) []byte { b[25] ^= 0x80; return b }), ErrBadIPChecksum},

		{"ipv4-total-below-ihl", mod(v4, then(set16(16, 19), fix4)), ErrBadIPLength},
		{"ipv4-total-past-frame", mod(v4, then(set16(16, uint16(len(v4)-14+1)), fix4)), ErrBadIPLength},
		{"ipv4-truncated", v4[:len(v4)-1], ErrBadIPLength},
		{"ipv6-payload-past-frame", mod(v6, set16(18, uint16(len(v6)-54+1))), ErrBadIPLength},
		{"ipv6-truncated", v6[:len(v6)-1], ErrBadIPLength},

		{"ipv4-mf", mod(v4, then(set16(20, 0x2000), fix4)), ErrFragment},
		{"ipv4-df-mf", mod(v4, then(set16(20, 0x6000), fix4)), ErrFragment},
		{"ipv4-offset", mod(v4, then(set16(20, 0x0001), fix4)), ErrFragment},
		{"ipv4-last-fragment", mod(v4, then(set16(20, 0x1fff), fix4)), ErrFragment},

		{"ipv4-tcp", mod(v4, then(func(b []byte) []byte { b[23] = 6; return b }, fix4)), ErrNotUDP},
		{"ipv6-hop-by-hop", mod(v6, func(b []byte) []byte { b[20] = 0; return b }), ErrNotUDP},
		{"ipv6-fragment-header", mod(v6, func(b []byte) []byte { b[20] = 44; return b }), ErrNotUDP},
		{"ipv6-tcp", mod(v6, func(b []byte) []byte { b[20] = 6; return b }), ErrNotUDP},

		{"udp-length-7-v4", mod(v4, set16(38, 7)), ErrBadUDPLength},
		{"udp-length-0-v4", mod(v4, set16(38, 0)), ErrBadUDPLength},
		{"udp-length-past-ip-v4", mod(v4, set16(38, 30)), ErrBadUDPLength},
		// Padding must not lend bytes to a UDP length that overruns
		// the IP packet.
		{"udp-length-into-padding", mod(append(bytes.Clone(v4), 0, 0), set16(38, 30)), ErrBadUDPLength},
		{"udp-length-7-v6", mod(v6, set16(58, 7)), ErrBadUDPLength},
		{"udp-length-past-ip-v6", mod(v6, set16(58, 30)), ErrBadUDPLength},

		{"udp-checksum-v4-payload", mod(v4, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrBadUDPChecksum},
		{"udp-checksum-v4-port", mod(v4, func(b []byte) []byte { b[37] ^= 1; return b }), ErrBadUDPChecksum},
		{"udp-checksum-v4-addr", mod(v4, then(func(b []byte) []byte { b[29] ^= 1; return b }, fix4)), ErrBadUDPChecksum},
		{"udp-checksum-v6-payload", mod(v6, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrBadUDPChecksum},
		{"udp-checksum-v6-addr", mod(v6, func(b []byte) []byte { b[14+8] ^= 1; return b }), ErrBadUDPChecksum},
		{"udp-checksum-v6-zero", mod(v6, set16(60, 0)), ErrBadUDPChecksum},
		// The computed checksum is 0, sent as ffff; a zero field would
		// sum correctly and must still be refused on IPv6.
		{"udp-checksum-v6-zero-for-ffff", mod(mustHex(t, vector6Zero), set16(60, 0)), ErrBadUDPChecksum},
		{"udp-checksum-vlan", mod(withVLAN(v6, 7, etherTypeIPv6), func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrBadUDPChecksum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Frame
			err := Parse(tc.frame, &f)
			if err != tc.want {
				t.Fatalf("Parse: %v, want %v", err, tc.want)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("errors.Is(%v, %v) is false", err, tc.want)
			}
			var r Reason
			if !errors.As(err, &r) || r != tc.want {
				t.Fatalf("errors.As: %v", r)
			}
		})
	}
}

// TestParseSkipUDPChecksumKeepsOtherChecks: the switch is narrow.
func TestParseSkipUDPChecksumKeepsOtherChecks(t *testing.T) {
	v4 := mustHex(t, vector4)
	p := Parser{SkipUDPChecksum: true}
	var f Frame
	if err := p.Parse(mod(v4, func(b []byte) []byte { b[22]--; return b }), &f); err != ErrBadIPChecksum {
		t.Errorf("IPv4 header checksum: %v", err)
	}
	if err := p.Parse(mod(v4, func(b []byte) []byte { b[39] = 7; return b }), &f); err != ErrBadUDPLength {
		t.Errorf("UDP length: %v", err)
	}
}

// TestParseResetsFrame: a reused Frame carries nothing over.
func TestParseResetsFrame(t *testing.T) {
	var f Frame
	if err := Parse(withVLAN(mustHex(t, vector6), 9, etherTypeIPv6), &f); err != nil {
		t.Fatal(err)
	}
	if err := Parse(mustHex(t, vector4), &f); err != nil {
		t.Fatal(err)
	}
	if f.HasVLAN || f.VLANTCI != 0 || f.Is6 || f.Endpoints != testEP4 || f.DSCP != 26 || f.ECN != 2 {
		t.Fatalf("stale fields: %+v", f)
	}
}

func TestReasonText(t *testing.T) {
	seen := map[string]bool{}
	for r := Reason(1); r < NumReasons; r++ {
		s, n := r.Error(), r.Name()
		if s == "" || s == Reason(NumReasons).Error() || seen[s] || r.String() != s {
			t.Errorf("reason %d: text %q", r, s)
		}
		if n == "" || n == "unknown" || seen[n] {
			t.Errorf("reason %d: name %q", r, n)
		}
		seen[s], seen[n] = true, true
	}
	if Reason(200).Error() != "frame: unknown reason" || Reason(200).Name() != "unknown" {
		t.Errorf("out of range: %q %q", Reason(200).Error(), Reason(200).Name())
	}
}
