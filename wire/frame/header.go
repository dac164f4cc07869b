package frame

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// Typed views over the headers this package reads and writes. They are
// unexported: the package's contract is Build, Finish and Parse, and each
// view is indexed only after the caller has checked its length, so the
// accessors carry no checks of their own (the compiler's bounds checks
// remain as the backstop against a missed one).

// EtherTypes and the IP protocol number (IANA registries).
const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100 // IEEE 802.1Q C-tag
	protoUDP      = 17

	// defaultTTL is the IPv4 TTL and IPv6 hop limit of every frame we
	// build: the value Linux uses (net.ipv4.ip_default_ttl), far above the
	// diameter of any data-centre fabric.
	defaultTTL = 64
)

// ethernet is an Ethernet II header without a VLAN tag. The FCS is not part
// of it: NICs strip it on receive and append it on transmit, and AF_XDP
// frames never contain it.
type ethernet []byte

const (
	ethDst  = 0
	ethSrc  = 6
	ethType = 12
	ethLen  = 14

	// vlanLen is the size of one 802.1Q tag: TCI then the inner EtherType.
	vlanLen = 4
)

func (e ethernet) etherType() uint16 { return binary.BigEndian.Uint16(e[ethType:]) }

func (e ethernet) encode(src, dst *[6]byte, etherType uint16) {
	copy(e[ethDst:ethDst+6], dst[:])
	copy(e[ethSrc:ethSrc+6], src[:])
	binary.BigEndian.PutUint16(e[ethType:], etherType)
}

// ipv4 is an IPv4 header (RFC 791), options included when IHL > 5.
type ipv4 []byte

const (
	ipv4VersionIHL = 0
	ipv4TOS        = 1
	ipv4TotalLen   = 2
	ipv4ID         = 4
	ipv4Flags      = 6 // flags (3 bits) and fragment offset (13 bits)
	ipv4TTL        = 8
	ipv4Proto      = 9
	ipv4Checksum   = 10
	ipv4Src        = 12
	ipv4Dst        = 16
	ipv4MinLen     = 20

	ipv4FlagDF      = 0x4000
	ipv4FlagMF      = 0x2000
	ipv4FragOffMask = 0x1fff
)

func (h ipv4) version() uint8       { return h[ipv4VersionIHL] >> 4 }
func (h ipv4) headerLen() int       { return int(h[ipv4VersionIHL]&0x0f) * 4 }
func (h ipv4) tos() uint8           { return h[ipv4TOS] }
func (h ipv4) totalLen() int        { return int(binary.BigEndian.Uint16(h[ipv4TotalLen:])) }
func (h ipv4) flagsFragOff() int    { return int(binary.BigEndian.Uint16(h[ipv4Flags:])) }
func (h ipv4) protocol() uint8      { return h[ipv4Proto] }
func (h ipv4) src() netip.Addr      { return netip.AddrFrom4([4]byte(h[ipv4Src : ipv4Src+4])) }
func (h ipv4) dst() netip.Addr      { return netip.AddrFrom4([4]byte(h[ipv4Dst : ipv4Dst+4])) }
func (h ipv4) addrs() []byte        { return h[ipv4Src : ipv4Dst+4] }
func (h ipv4) setChecksum(c uint16) { binary.BigEndian.PutUint16(h[ipv4Checksum:], c) }

// encode writes a 20-byte header with no options. The checksum is left zero
// for Finish, which runs once the caller is done with the packet.
func (h ipv4) encode(src, dst *[4]byte, tos uint8, totalLen int) {
	h[ipv4VersionIHL] = 4<<4 | ipv4MinLen/4
	h[ipv4TOS] = tos
	binary.BigEndian.PutUint16(h[ipv4TotalLen:], uint16(totalLen))
	// ID 0 with DF set: RFC 6864 section 4.1 lets an atomic datagram
	// (DF=1, MF=0, offset 0) carry any ID, since it is never reassembled.
	binary.BigEndian.PutUint16(h[ipv4ID:], 0)
	binary.BigEndian.PutUint16(h[ipv4Flags:], ipv4FlagDF)
	h[ipv4TTL] = defaultTTL
	h[ipv4Proto] = protoUDP
	binary.BigEndian.PutUint16(h[ipv4Checksum:], 0)
	copy(h[ipv4Src:ipv4Src+4], src[:])
	copy(h[ipv4Dst:ipv4Dst+4], dst[:])
}

// ipv6 is the fixed IPv6 header (RFC 8200). Extension headers, if any,
// follow it and are not part of the view.
type ipv6 []byte

const (
	ipv6VersionTCFlow = 0 // version (4 bits), traffic class (8), flow label (20)
	ipv6PayloadLen    = 4
	ipv6NextHeader    = 6
	ipv6HopLimit      = 7
	ipv6Src           = 8
	ipv6Dst           = 24
	ipv6Len           = 40
)

func (h ipv6) version() uint8 { return h[ipv6VersionTCFlow] >> 4 }
func (h ipv6) trafficClass() uint8 {
	return uint8(binary.BigEndian.Uint16(h[ipv6VersionTCFlow:]) >> 4)
}
func (h ipv6) payloadLen() int   { return int(binary.BigEndian.Uint16(h[ipv6PayloadLen:])) }
func (h ipv6) nextHeader() uint8 { return h[ipv6NextHeader] }
func (h ipv6) src() netip.Addr   { return netip.AddrFrom16([16]byte(h[ipv6Src : ipv6Src+16])) }
func (h ipv6) dst() netip.Addr   { return netip.AddrFrom16([16]byte(h[ipv6Dst : ipv6Dst+16])) }
func (h ipv6) addrs() []byte     { return h[ipv6Src : ipv6Dst+16] }

// encode writes the fixed header with next header UDP. The flow label is
// zero: the fabric's ECMP entropy is the UDP source port, which every
// switch hashes, while not every switch hashes the flow label.
func (h ipv6) encode(src, dst *[16]byte, tc uint8, payloadLen int) {
	binary.BigEndian.PutUint32(h[ipv6VersionTCFlow:], 6<<28|uint32(tc)<<20)
	binary.BigEndian.PutUint16(h[ipv6PayloadLen:], uint16(payloadLen))
	h[ipv6NextHeader] = protoUDP
	h[ipv6HopLimit] = defaultTTL
	copy(h[ipv6Src:ipv6Src+16], src[:])
	copy(h[ipv6Dst:ipv6Dst+16], dst[:])
}

// udp is a UDP header (RFC 768) followed by its payload.
type udp []byte

const (
	udpSrcPort  = 0
	udpDstPort  = 2
	udpLength   = 4
	udpChecksum = 6
	udpLen      = 8
)

func (u udp) srcPort() uint16      { return binary.BigEndian.Uint16(u[udpSrcPort:]) }
func (u udp) dstPort() uint16      { return binary.BigEndian.Uint16(u[udpDstPort:]) }
func (u udp) length() int          { return int(binary.BigEndian.Uint16(u[udpLength:])) }
func (u udp) checksum() uint16     { return binary.BigEndian.Uint16(u[udpChecksum:]) }
func (u udp) setChecksum(c uint16) { binary.BigEndian.PutUint16(u[udpChecksum:], c) }

func (u udp) encode(srcPort, dstPort uint16, length int) {
	binary.BigEndian.PutUint16(u[udpSrcPort:], srcPort)
	binary.BigEndian.PutUint16(u[udpDstPort:], dstPort)
	binary.BigEndian.PutUint16(u[udpLength:], uint16(length))
	binary.BigEndian.PutUint16(u[udpChecksum:], 0)
}

// checksumUDP returns the complemented ones-complement sum of the UDP
// pseudo-header and segment u, which must be exactly the UDP header and
// payload (u.length() bytes). addrs is the source and destination address,
// contiguous as they are in both IP headers. The pseudo-header is addrs, a
// zero byte, protocol 17 and the UDP length (RFC 768); RFC 8200 section 8.1
// widens the length and the next-header field to 32 bits each, which adds up
// to the same sum for lengths below 65536.
//
// With the checksum field zeroed, the result is the value to transmit (after
// mapping 0 to 0xffff, see Finish). With the received field in place, a
// correct segment yields 0.
func checksumUDP(addrs []byte, u udp) uint16 {
	// The rest of the pseudo-header, protoUDP+len(u), is at most
	// 17+65535: it goes in as the initial value rather than as a buffer.
	// addrs has an even length, so the sum chains straight into u at the
	// 64-bit level (see Sum for the byte swap).
	ph := fold(uint64(protoUDP) + uint64(len(u)))
	acc := sum64(addrs, uint64(bits.ReverseBytes16(ph)))
	return ^bits.ReverseBytes16(fold(sum64(u, acc)))
}
