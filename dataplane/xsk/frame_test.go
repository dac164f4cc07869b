package xsk

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// frameSpec describes the crafted Ethernet/IP/UDP test frames.
type frameSpec struct {
	srcMAC, dstMAC net.HardwareAddr
	src, dst       netip.Addr
	sport, dport   uint16
}

func mac(b byte) net.HardwareAddr { return net.HardwareAddr{0x02, 0, 0, 0, 0, b} }

func (f frameSpec) v4() frameSpec {
	if !f.src.Is4() {
		f.src, f.dst = netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")
	}
	return f
}

func (f frameSpec) v6() frameSpec {
	if !f.src.Is6() {
		f.src, f.dst = netip.MustParseAddr("fd00:99::1"), netip.MustParseAddr("fd00:99::2")
	}
	return f
}

// build writes the frame with sequence number seq and a payload of n bytes
// (at least 8) into b and returns its length. The payload is a function of
// seq, so a receiver can rebuild the frame it expects and compare every byte.
func (f frameSpec) build(b []byte, seq uint64, n int) int {
	n = max(n, 8)
	copy(b[0:], f.dstMAC)
	copy(b[6:], f.srcMAC)
	var udp []byte
	if f.src.Is4() {
		binary.BigEndian.PutUint16(b[12:], 0x0800)
		ip := b[14:34]
		ip[0], ip[1] = 0x45, 0
		binary.BigEndian.PutUint16(ip[2:], uint16(20+8+n))
		binary.BigEndian.PutUint32(ip[4:], 0x40000000|uint32(seq&0xffff)<<16) // id, DF
		ip[8], ip[9] = 64, 17
		ip[10], ip[11] = 0, 0
		s, d := f.src.As4(), f.dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		binary.BigEndian.PutUint16(ip[10:], checksum(ip))
		udp = b[34:]
	} else {
		binary.BigEndian.PutUint16(b[12:], 0x86dd)
		ip := b[14:54]
		binary.BigEndian.PutUint32(ip[0:], 6<<28)
		binary.BigEndian.PutUint16(ip[4:], uint16(8+n))
		ip[6], ip[7] = 17, 64
		s, d := f.src.As16(), f.dst.As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		udp = b[54:]
	}
	binary.BigEndian.PutUint16(udp[0:], f.sport)
	binary.BigEndian.PutUint16(udp[2:], f.dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+n))
	binary.BigEndian.PutUint16(udp[6:], 0) // no checksum: nothing on the path checks it
	p := udp[8 : 8+n]
	binary.BigEndian.PutUint64(p, seq)
	x := uint32(seq)*2654435761 + 1
	for i := 8; i < n; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[i] = byte(x)
	}
	return len(b) - len(udp) + 8 + n
}

// seqOf reads the sequence number of a frame built by build.
func seqOf(b []byte) (uint64, bool) {
	off := 14 + 20 + 8
	if len(b) > 13 && binary.BigEndian.Uint16(b[12:]) == 0x86dd {
		off = 14 + 40 + 8
	}
	if len(b) < off+8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[off:]), true
}

func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
