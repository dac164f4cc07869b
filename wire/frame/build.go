package frame

import "net/netip"

// Header lengths. A frame we build has no VLAN tag and no IP options, so
// its header length depends on the address family alone.
const (
	HeaderLen4 = ethLen + ipv4MinLen + udpLen // 42
	HeaderLen6 = ethLen + ipv6Len + udpLen    // 62

	// MaxHeaderLen is the longer of the two. A dataplane that writes every
	// transport packet at offset MaxHeaderLen in its UMEM frame can start
	// the Ethernet frame at MaxHeaderLen-HeaderLen(is6) and use one layout
	// for both families.
	MaxHeaderLen = HeaderLen6

	// MaxPayload4 and MaxPayload6 are the largest UDP payloads the 16-bit
	// length fields can describe: the IPv4 total length counts the IP and
	// UDP headers, the IPv6 payload length counts the UDP header only. The
	// path MTU is far lower; enforcing it is the transport's job.
	MaxPayload4 = 0xffff - ipv4MinLen - udpLen
	MaxPayload6 = 0xffff - udpLen
)

// HeaderLen returns the length of the Ethernet, IP and UDP headers that
// Build writes: HeaderLen6 if is6, else HeaderLen4.
func HeaderLen(is6 bool) int {
	if is6 {
		return HeaderLen6
	}
	return HeaderLen4
}

// Endpoints is the addressing of one packet: what a connection's path
// resolves to once ARP/ND and routing are done. Parse fills one in, as
// found on the wire, inside Frame.
type Endpoints struct {
	SrcMAC, DstMAC [6]byte
	// Src and Dst must both be IPv4 or both IPv6 (an IPv4-mapped IPv6
	// address counts as IPv6 and is sent in an IPv6 header). Zones are
	// ignored: they have no representation on the wire.
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

// Build writes the Ethernet, IPv4 or IPv6, and UDP headers of a frame whose
// UDP payload is payloadLen bytes at buf[hdrLen:hdrLen+payloadLen], and
// returns hdrLen, which is HeaderLen of the address family of ep. The
// payload may be written before or after Build; it is neither read nor
// touched. dscp (6 bits) and ecn (2 bits) go into the IPv4 TOS or IPv6
// traffic class. Other fields are fixed: TTL and hop limit 64, IPv4 DF set
// and ID 0, IPv6 flow label 0.
//
// The checksums are left zero: call Finish once the payload is in place.
//
// buf must hold at least hdrLen+payloadLen bytes. Build does not allocate.
func Build(buf []byte, ep *Endpoints, dscp, ecn uint8, payloadLen int) (hdrLen int, err error) {
	if dscp > 63 {
		return 0, ErrBadDSCP
	}
	if ecn > 3 {
		return 0, ErrBadECN
	}
	tos := dscp<<2 | ecn
	switch {
	case ep.Src.Is4() && ep.Dst.Is4():
		if payloadLen < 0 || payloadLen > MaxPayload4 {
			return 0, ErrPayloadTooLarge
		}
		if len(buf) < HeaderLen4+payloadLen {
			return 0, ErrShortBuffer
		}
		ethernet(buf).encode(&ep.SrcMAC, &ep.DstMAC, etherTypeIPv4)
		src, dst := ep.Src.As4(), ep.Dst.As4()
		ipv4(buf[ethLen:]).encode(&src, &dst, tos, ipv4MinLen+udpLen+payloadLen)
		udp(buf[ethLen+ipv4MinLen:]).encode(ep.SrcPort, ep.DstPort, udpLen+payloadLen)
		return HeaderLen4, nil
	case ep.Src.Is6() && ep.Dst.Is6():
		if payloadLen < 0 || payloadLen > MaxPayload6 {
			return 0, ErrPayloadTooLarge
		}
		if len(buf) < HeaderLen6+payloadLen {
			return 0, ErrShortBuffer
		}
		ethernet(buf).encode(&ep.SrcMAC, &ep.DstMAC, etherTypeIPv6)
		src, dst := ep.Src.As16(), ep.Dst.As16()
		ipv6(buf[ethLen:]).encode(&src, &dst, tos, udpLen+payloadLen)
		udp(buf[ethLen+ipv6Len:]).encode(ep.SrcPort, ep.DstPort, udpLen+payloadLen)
		return HeaderLen6, nil
	default:
		return 0, ErrAddrFamily
	}
}

// Finish computes the checksums of a frame that Build wrote into buf: the
// IPv4 header checksum, and the UDP checksum over the pseudo-header, UDP
// header and payload. It reads the lengths from the headers, so buf may be
// longer than the frame (a whole UMEM chunk, say). Call it after the last
// write to the payload; any later write invalidates the UDP checksum.
//
// The UDP checksum is computed on IPv4 too, where zero ("none") would be
// legal: the transport's own CRC covers its header and payload but not the
// UDP ports, and a corrupted destination port would deliver the packet to
// the wrong socket. A computed checksum of 0 is sent as 0xffff (RFC 768),
// since 0 would mean "none".
//
// Finish returns ErrNotBuilt or ErrShortBuffer, without touching buf, if buf
// does not start with headers that Build could have written. It does not
// allocate.
func Finish(buf []byte) error { return finish(buf, false) }

func finish(buf []byte, skipUDP bool) error {
	if len(buf) < ethLen {
		return ErrShortBuffer
	}
	var addrs []byte
	var seg udp
	switch ethernet(buf).etherType() {
	case etherTypeIPv4:
		if len(buf) < HeaderLen4 {
			return ErrShortBuffer
		}
		ip := ipv4(buf[ethLen : ethLen+ipv4MinLen])
		if ip.version() != 4 || ip.headerLen() != ipv4MinLen || ip.protocol() != protoUDP {
			return ErrNotBuilt
		}
		seg = udp(buf[ethLen+ipv4MinLen:])
		if ip.totalLen() != ipv4MinLen+seg.length() || seg.length() < udpLen {
			return ErrNotBuilt
		}
		if len(seg) < seg.length() {
			return ErrShortBuffer
		}
		ip.setChecksum(0)
		ip.setChecksum(^Sum(ip, 0))
		addrs = ip.addrs()
	case etherTypeIPv6:
		if len(buf) < HeaderLen6 {
			return ErrShortBuffer
		}
		ip := ipv6(buf[ethLen : ethLen+ipv6Len])
		if ip.version() != 6 || ip.nextHeader() != protoUDP {
			return ErrNotBuilt
		}
		seg = udp(buf[ethLen+ipv6Len:])
		if ip.payloadLen() != seg.length() || seg.length() < udpLen {
			return ErrNotBuilt
		}
		if len(seg) < seg.length() {
			return ErrShortBuffer
		}
		addrs = ip.addrs()
	default:
		return ErrNotBuilt
	}
	seg = seg[:seg.length()]
	seg.setChecksum(0)
	if skipUDP && len(addrs) == 8 {
		return nil // IPv4 with a zero UDP checksum (RFC 768): see FinishV4NoUDPChecksum
	}
	c := checksumUDP(addrs, seg)
	if c == 0 {
		c = 0xffff
	}
	seg.setChecksum(c)
	return nil
}

// FinishV4NoUDPChecksum is Finish, except that an IPv4 frame gets a zero
// UDP checksum ("none", RFC 768) instead of a computed one; IPv6 frames,
// where the checksum is mandatory (RFC 8200 §8.1), get it computed as by
// Finish. MetaRoCE's CRC32C covers the transport header and payload, as
// RoCEv2's ICRC does, and RoCEv2 sends zero UDP checksums for the same
// reason (docs/spec.md §2.1): the checksum would cost a second pass over
// the payload per packet for nothing the CRC does not already catch.
func FinishV4NoUDPChecksum(buf []byte) error { return finish(buf, true) }
