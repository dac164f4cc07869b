package frame

import "encoding/binary"

// Frame is a parsed frame. It is meant to be reused: Parse overwrites every
// field on success and leaves the contents unspecified on failure.
type Frame struct {
	// Endpoints holds the addresses and ports as they are on the wire
	// (the sender's are Src*). A reply swaps them.
	Endpoints

	// Is6 reports an IPv6 frame; Src and Dst are then 16-byte addresses
	// (possibly IPv4-mapped), otherwise 4-byte ones.
	Is6 bool

	// HasVLAN reports that the frame carried one 802.1Q tag, whose TCI
	// (priority, DEI and VLAN ID) is in VLANTCI. Build never writes a tag.
	HasVLAN bool
	VLANTCI uint16

	// DSCP and ECN are the two parts of the IPv4 TOS or IPv6 traffic
	// class byte.
	DSCP, ECN uint8

	// Payload is the UDP payload: the MetaRoCE transport header and its
	// data. It aliases the frame passed to Parse, and it is bounded by the
	// UDP length, so Ethernet padding and any bytes past the IP packet are
	// not in it.
	Payload []byte
}

// Parser parses frames. The zero value verifies every checksum; it holds
// configuration only, so one Parser may be shared by any number of
// goroutines.
type Parser struct {
	// SkipUDPChecksum turns off verification of the UDP checksum (the
	// IPv4 header checksum is always verified). Set it only where frames
	// may legitimately arrive with a partial checksum: a copy-mode AF_XDP
	// socket on a veth whose peer is the kernel's own stack can receive
	// skbs in the CHECKSUM_PARTIAL state, whose checksum field holds only
	// the pseudo-header sum because the checksum was left to an offload
	// that veth never performs. Frames from Build always carry full
	// checksums, and the transport's CRC still protects its own header
	// and payload.
	SkipUDPChecksum bool
}

// Parse parses frame with every checksum verified; it is the zero Parser's
// Parse.
func Parse(frame []byte, f *Frame) error {
	return Parser{}.Parse(frame, f)
}

// Parse validates the Ethernet, IP and UDP headers of frame and fills f. On
// failure the error is a Reason (nil on success, never another type); the
// headers are checked outermost first and the first failing check is
// reported, so a frame that is wrong in several ways is counted once. See the package documentation for
// what is and is not validated. Parse does not allocate.
func (p Parser) Parse(frame []byte, f *Frame) error {
	if len(frame) < ethLen {
		return ErrTooShort
	}
	eth := ethernet(frame)
	copy(f.DstMAC[:], frame[ethDst:ethDst+6])
	copy(f.SrcMAC[:], frame[ethSrc:ethSrc+6])
	et := eth.etherType()
	l3 := frame[ethLen:]
	f.HasVLAN, f.VLANTCI = false, 0
	if et == etherTypeVLAN {
		if len(l3) < vlanLen {
			return ErrTooShort
		}
		f.HasVLAN = true
		f.VLANTCI = binary.BigEndian.Uint16(l3[0:])
		et = binary.BigEndian.Uint16(l3[2:])
		l3 = l3[vlanLen:]
	}

	var addrs []byte
	var seg udp
	switch et {
	case etherTypeIPv4:
		if len(l3) < ipv4MinLen {
			return ErrTooShort
		}
		ip := ipv4(l3)
		hl := ip.headerLen()
		if ip.version() != 4 || hl < ipv4MinLen {
			return ErrBadIPHeader
		}
		if len(l3) < hl {
			return ErrTooShort
		}
		// A correct header, checksum field included, sums to 0xffff.
		if Sum(ip[:hl], 0) != 0xffff {
			return ErrBadIPChecksum
		}
		tl := ip.totalLen()
		if tl < hl || tl > len(l3) {
			return ErrBadIPLength
		}
		if ff := ip.flagsFragOff(); ff&ipv4FlagMF != 0 || ff&ipv4FragOffMask != 0 {
			return ErrFragment
		}
		if ip.protocol() != protoUDP {
			return ErrNotUDP
		}
		f.Is6 = false
		f.Src, f.Dst = ip.src(), ip.dst()
		f.DSCP, f.ECN = ip.tos()>>2, ip.tos()&3
		addrs = ip.addrs()
		seg = udp(l3[hl:tl])
	case etherTypeIPv6:
		if len(l3) < ipv6Len {
			return ErrTooShort
		}
		ip := ipv6(l3)
		if ip.version() != 6 {
			return ErrBadIPHeader
		}
		pl := ip.payloadLen()
		if pl > len(l3)-ipv6Len {
			return ErrBadIPLength
		}
		if ip.nextHeader() != protoUDP {
			return ErrNotUDP
		}
		f.Is6 = true
		f.Src, f.Dst = ip.src(), ip.dst()
		tc := ip.trafficClass()
		f.DSCP, f.ECN = tc>>2, tc&3
		addrs = ip.addrs()
		seg = udp(l3[ipv6Len : ipv6Len+pl])
	default:
		return ErrNotIP
	}

	if len(seg) < udpLen {
		return ErrTooShort
	}
	// The UDP length may be shorter than the IP payload; the bytes
	// between are ignored, as Linux ignores them. It may not be longer.
	ul := seg.length()
	if ul < udpLen || ul > len(seg) {
		return ErrBadUDPLength
	}
	seg = seg[:ul]
	if !p.SkipUDPChecksum {
		// On IPv4 a zero checksum means the sender computed none
		// (RFC 768). On IPv6 it is forbidden (RFC 8200 section 8.1), and
		// the sum alone would not catch it: where the computed checksum
		// is 0 (sent as 0xffff), a zero field sums just as correctly.
		switch c := seg.checksum(); {
		case c == 0 && !f.Is6:
		case c == 0 || checksumUDP(addrs, seg) != 0:
			return ErrBadUDPChecksum
		}
	}
	f.SrcPort, f.DstPort = seg.srcPort(), seg.dstPort()
	f.Payload = seg[udpLen:]
	return nil
}
