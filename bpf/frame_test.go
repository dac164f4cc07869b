package bpf

import (
	"encoding/binary"
)

// Hand-built frames for the test runs: just enough Ethernet, 802.1Q, IPv4,
// IPv6 and UDP to exercise every branch of xdp_steer.c.

const (
	etherTypeIPv4 = 0x0800
	etherTypeARP  = 0x0806
	etherTypeVLAN = 0x8100
	etherTypeIPv6 = 0x86dd

	protoTCP      = 6
	protoUDP      = 17
	protoHopByHop = 0

	ipv4MF = 0x2000 // more fragments
)

var (
	macDst = []byte{0x02, 0, 0, 0, 0, 0x02}
	macSrc = []byte{0x02, 0, 0, 0, 0, 0x01}
	ip4Src = []byte{10, 0, 0, 1}
	ip4Dst = []byte{10, 0, 0, 2}
	ip6Src = []byte{0xfd, 0, 15: 1}
	ip6Dst = []byte{0xfd, 0, 15: 2}
)

// packet describes a test frame. The zero value plus a payload is an
// untagged IPv4 UDP packet from port 40000 to port 0.
type packet struct {
	vlan    bool   // add one 802.1Q tag (VID 100)
	ipv6    bool   // IPv6 instead of IPv4
	options int    // IPv4 option bytes (a multiple of 4, at most 40)
	proto   uint8  // L4 protocol; 0 means UDP
	fragOff uint16 // IPv4 flags and fragment offset field
	ext     bool   // IPv6: put a hop-by-hop header before the UDP header
	sport   uint16 // 0 means 40000
	dport   uint16
	udpLen  int // UDP length field; 0 means the true length
	payload []byte
}

// metaroce returns a MetaRoCE-looking payload: version byte, then n-1 bytes.
func metaroce(version byte, n int) []byte {
	b := make([]byte, n)
	if n > 0 {
		b[0] = version
	}
	for i := 1; i < n; i++ {
		b[i] = byte(i)
	}
	return b
}

func (p packet) frame() []byte {
	proto := p.proto
	if proto == 0 {
		proto = protoUDP
	}
	sport := p.sport
	if sport == 0 {
		sport = 40000
	}

	l4 := make([]byte, 8, 8+len(p.payload))
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], p.dport)
	l4 = append(l4, p.payload...)
	udpLen := len(l4)
	if p.udpLen != 0 {
		udpLen = p.udpLen
	}
	binary.BigEndian.PutUint16(l4[4:], uint16(udpLen))

	var l3 []byte
	if p.ipv6 {
		binary.BigEndian.PutUint16(l4[6:], udpChecksum(ip6Src, ip6Dst, l4))
		next := proto
		if p.ext {
			// Hop-by-hop header: next header, length 0 (8 bytes), PadN.
			l4 = append([]byte{proto, 0, 1, 4, 0, 0, 0, 0}, l4...)
			next = protoHopByHop
		}
		l3 = make([]byte, 40, 40+len(l4))
		l3[0] = 6 << 4
		binary.BigEndian.PutUint16(l3[4:], uint16(len(l4)))
		l3[6] = next
		l3[7] = 64
		copy(l3[8:], ip6Src)
		copy(l3[24:], ip6Dst)
	} else {
		binary.BigEndian.PutUint16(l4[6:], udpChecksum(ip4Src, ip4Dst, l4))
		hl := 20 + p.options
		l3 = make([]byte, hl, hl+len(l4))
		l3[0] = 4<<4 | byte(hl/4)
		binary.BigEndian.PutUint16(l3[2:], uint16(hl+len(l4)))
		binary.BigEndian.PutUint16(l3[4:], 0x1234)
		binary.BigEndian.PutUint16(l3[6:], p.fragOff)
		l3[8] = 64
		l3[9] = proto
		copy(l3[12:], ip4Src)
		copy(l3[16:], ip4Dst)
		for i := 20; i < hl; i++ {
			l3[i] = 1 // NOP options
		}
		binary.BigEndian.PutUint16(l3[10:], checksum(0, l3))
	}
	if proto != protoUDP {
		// Keep the bytes, but they no longer form a UDP header; the
		// ports stay where a parser that ignores the protocol would look.
		l4[6], l4[7] = 0, 0
	}
	l3 = append(l3, l4...)

	etherType := uint16(etherTypeIPv4)
	if p.ipv6 {
		etherType = etherTypeIPv6
	}
	return append(ethernet(etherType, p.vlan), l3...)
}

// ethernet returns an Ethernet II header, with an 802.1Q tag if vlan.
func ethernet(etherType uint16, vlan bool) []byte {
	b := append(append([]byte{}, macDst...), macSrc...)
	if vlan {
		b = binary.BigEndian.AppendUint16(b, etherTypeVLAN)
		b = binary.BigEndian.AppendUint16(b, 100) // PCP 0, DEI 0, VID 100
	}
	return binary.BigEndian.AppendUint16(b, etherType)
}

// arpRequest returns an ARP who-has for ip4Dst from ip4Src.
func arpRequest() []byte {
	b := ethernet(etherTypeARP, false)
	copy(b, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	b = binary.BigEndian.AppendUint16(b, 1)      // hardware type Ethernet
	b = binary.BigEndian.AppendUint16(b, 0x0800) // protocol IPv4
	b = append(b, 6, 4)                          // address lengths
	b = binary.BigEndian.AppendUint16(b, 1)      // request
	b = append(b, macSrc...)
	b = append(b, ip4Src...)
	b = append(b, 0, 0, 0, 0, 0, 0)
	return append(b, ip4Dst...)
}

// checksum folds b into the one's complement sum sum and returns the
// complement of the result, as the IPv4 header and UDP checksums need.
func checksum(sum uint32, b []byte) uint16 {
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// udpChecksum computes the UDP checksum of seg (header with a zero checksum
// field, then payload) over the IPv4 or IPv6 pseudo-header.
func udpChecksum(src, dst, seg []byte) uint16 {
	var sum uint32
	for _, a := range [][]byte{src, dst} {
		for i := 0; i < len(a); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(a[i:]))
		}
	}
	sum += protoUDP + uint32(len(seg))
	c := checksum(sum, seg)
	if c == 0 {
		return 0xffff // zero means "no checksum" in UDP
	}
	return c
}
