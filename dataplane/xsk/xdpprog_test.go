package xsk

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// The tests' XDP program, written with cilium/ebpf's asm package (no clang,
// no dependency on bpf/). It redirects UDP packets to one destination port,
// over IPv4 (no IP options) or IPv6 (no extension headers), to the AF_XDP
// socket in xsks[rx_queue_index], and passes everything else (ARP, ND, other
// traffic) to the kernel stack. In C:
//
//	if (data + 42 > data_end) return XDP_PASS;
//	if (eth->proto == htons(ETH_P_IP)) {
//		if (ip->ihl_ver != 0x45 || ip->proto != IPPROTO_UDP || udp4->dest != htons(port)) return XDP_PASS;
//	} else if (eth->proto == htons(ETH_P_IPV6)) {
//		if (data + 62 > data_end) return XDP_PASS;
//		if (ip6->nexthdr != IPPROTO_UDP || udp6->dest != htons(port)) return XDP_PASS;
//	} else return XDP_PASS;
//	return bpf_redirect_map(&xsks, ctx->rx_queue_index, fallback);

// Offsets into a frame and struct xdp_md.
const (
	offEtherType = 12
	offIP4VerIHL = 14
	offIP4Proto  = 14 + 9
	offUDP4Dport = 14 + 20 + 2
	offIP6Next   = 14 + 6
	offUDP6Dport = 14 + 40 + 2
	minUDP4      = 14 + 20 + 8
	minUDP6      = 14 + 40 + 8

	xdpMDData         = 0
	xdpMDDataEnd      = 4
	xdpMDRxQueueIndex = 16

	xdpDrop = 1
	xdpPass = 2
)

// htons16 returns the value a 16-bit load of the big-endian bytes of v gives
// on this machine, for comparing with loaded header fields.
func htons16(v uint16) int32 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return int32(binary.NativeEndian.Uint16(b[:]))
}

func redirectInsns(xsks *ebpf.Map, port uint16, fallback int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, xdpMDData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, xdpMDDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, minUDP4),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, offEtherType, asm.Half),
		asm.JEq.Imm(asm.R5, htons16(unix.ETH_P_IP), "ipv4"),
		asm.JNE.Imm(asm.R5, htons16(unix.ETH_P_IPV6), "pass"),

		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, minUDP6),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, offIP6Next, asm.Byte),
		asm.JNE.Imm(asm.R5, unix.IPPROTO_UDP, "pass"),
		asm.LoadMem(asm.R5, asm.R2, offUDP6Dport, asm.Half),
		asm.JNE.Imm(asm.R5, htons16(port), "pass"),
		asm.Ja.Label("redirect"),

		asm.LoadMem(asm.R5, asm.R2, offIP4VerIHL, asm.Byte).WithSymbol("ipv4"),
		asm.JNE.Imm(asm.R5, 0x45, "pass"),
		asm.LoadMem(asm.R5, asm.R2, offIP4Proto, asm.Byte),
		asm.JNE.Imm(asm.R5, unix.IPPROTO_UDP, "pass"),
		asm.LoadMem(asm.R5, asm.R2, offUDP4Dport, asm.Half),
		asm.JNE.Imm(asm.R5, htons16(port), "pass"),

		asm.LoadMapPtr(asm.R1, xsks.FD()).WithSymbol("redirect"),
		asm.LoadMem(asm.R2, asm.R6, xdpMDRxQueueIndex, asm.Word),
		asm.Mov.Imm(asm.R3, fallback),
		asm.FnRedirectMap.Call(),
		asm.Return(),

		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	}
}

// loadRedirect creates an XSKMAP of queues entries and the program that
// redirects UDP to port into it. frags marks the program multi-buffer aware
// (BPF_F_XDP_HAS_FRAGS), needed to attach at an MTU above ~3506.
func loadRedirect(port uint16, queues int, frags bool, fallback int32) (*ebpf.Program, *ebpf.Map, error) {
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{
		Name: "xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(queues),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create xskmap: %w", err)
	}
	spec := &ebpf.ProgramSpec{
		Name:         "xsk_test_redir",
		Type:         ebpf.XDP,
		License:      "GPL",
		Instructions: redirectInsns(xsks, port, fallback),
	}
	if frags {
		spec.Flags = unix.BPF_F_XDP_HAS_FRAGS
	}
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		xsks.Close()
		return nil, nil, fmt.Errorf("load xdp program: %w", err)
	}
	return prog, xsks, nil
}

// TestRedirectProgramMatches runs the program on crafted frames with
// BPF_PROG_TEST_RUN. With an empty map, bpf_redirect_map returns the
// fallback action, here XDP_DROP, so "dropped" means "matched".
func TestRedirectProgramMatches(t *testing.T) {
	if unix.Geteuid() != 0 {
		t.Skip("needs root (CAP_BPF) to load a program")
	}
	const port = 4791
	prog, xsks, err := loadRedirect(port, 1, false, xdpDrop)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	defer xsks.Close()

	f := frameSpec{srcMAC: mac(1), dstMAC: mac(2), sport: 1000, dport: port}
	buf := make([]byte, 256)
	cases := []struct {
		name  string
		frame func() []byte
		want  uint32
	}{
		{"udp4 to port", func() []byte { return buf[:f.v4().build(buf, 0, 20)] }, xdpDrop},
		{"udp6 to port", func() []byte { return buf[:f.v6().build(buf, 0, 20)] }, xdpDrop},
		{"udp4 other port", func() []byte { g := f; g.dport++; return buf[:g.v4().build(buf, 0, 20)] }, xdpPass},
		{"udp6 other port", func() []byte { g := f; g.dport = 53; return buf[:g.v6().build(buf, 0, 20)] }, xdpPass},
		{"tcp4", func() []byte { n := f.v4().build(buf, 0, 20); buf[offIP4Proto] = unix.IPPROTO_TCP; return buf[:n] }, xdpPass},
		{"ip4 options", func() []byte { n := f.v4().build(buf, 0, 20); buf[offIP4VerIHL] = 0x46; return buf[:n] }, xdpPass},
		{"arp", func() []byte {
			n := f.v4().build(buf, 0, 20)
			binary.BigEndian.PutUint16(buf[offEtherType:], unix.ETH_P_ARP)
			return buf[:n]
		}, xdpPass},
		{"runt udp6", func() []byte { return buf[:f.v6().build(buf, 0, 20)][:minUDP6-1] }, xdpPass},
	}
	for _, c := range cases {
		fr := c.frame()
		// BPF_PROG_TEST_RUN wants at least an Ethernet header.
		ret, err := prog.Run(&ebpf.RunOptions{Data: fr})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ret != c.want {
			t.Errorf("%s: action %d, want %d", c.name, ret, c.want)
		}
	}
}
