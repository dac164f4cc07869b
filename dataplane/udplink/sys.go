package udplink

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The syscalls and the byte layouts the kernel reads and writes. x/sys/unix
// has the types (Mmsghdr, Msghdr, Iovec, Cmsghdr, RawSockaddrInet4/6, with
// their per-architecture layouts) and the syscall numbers, but no wrapper for
// recvmmsg or sendmmsg, and its Poll allocates a Timespec per call; these
// pass pointers to storage the Link allocated once, so no call allocates.

// recvmmsg receives up to len(vec) datagrams without blocking (the socket is
// SOCK_NONBLOCK) and returns how many.
func recvmmsg(fd int, vec []unix.Mmsghdr) (int, unix.Errno) {
	r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&vec[0])),
		uintptr(len(vec)), 0, 0, 0)
	return int(r), e
}

// sendmmsg sends up to len(vec) entries and returns how many the kernel
// took. An entry that fails after the first ends the call early with a
// count and no error; one that fails first returns its errno.
func sendmmsg(fd int, vec []unix.Mmsghdr) (int, unix.Errno) {
	r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&vec[0])),
		uintptr(len(vec)), 0, 0, 0)
	return int(r), e
}

// ppoll waits for pfd's events; ts nil waits for ever.
func ppoll(pfd *unix.PollFd, ts *unix.Timespec) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(pfd)), 1,
		uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	return e
}

// Control message layout. The kernel aligns each cmsg to the word size
// (unix.CmsgSpace); data starts unix.CmsgLen(0) into its cmsg.
var (
	cmsgHdrLen = unix.CmsgLen(0)
	cmsgInt    = unix.CmsgSpace(4) // IP_TOS, IPV6_TCLASS, UDP_GRO: an int
	cmsgU16    = unix.CmsgSpace(2) // UDP_SEGMENT: a __u16
)

const (
	// rxCtlLen is the control buffer of one receive slot: the TOS or
	// TCLASS cmsg and the UDP_GRO cmsg, with room to spare (a larger one
	// sets MSG_CTRUNC, which drops the datagram).
	rxCtlLen = 64
	// txCtlLen is the control buffer of one send entry: the TOS or TCLASS
	// cmsg, then UDP_SEGMENT when the entry carries a GSO run.
	txCtlLen = 64
)

// ctlBufs returns n control buffers of size bytes each, carved from one
// []uint64 so that every buffer is word-aligned, as cmsg headers must be.
func ctlBufs(n, size int) [][]byte {
	words := make([]uint64, n*size/8)
	all := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n*size)
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = all[i*size : (i+1)*size : (i+1)*size]
	}
	return bufs
}

// putCmsgHdr writes a cmsg header for datalen bytes of data at b[0:].
func putCmsgHdr(b []byte, level, typ int32, datalen int) {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(datalen))
}

// ptrAt points at b[off], for writing a cmsg's data.
func ptrAt(b []byte, off int) unsafe.Pointer { return unsafe.Pointer(&b[off]) }

// rxMeta is what the control messages of one received datagram say.
type rxMeta struct {
	tos uint8 // IPv4 TOS or IPv6 traffic class
	seg int   // UDP_GRO segment size; 0 when the datagram was not coalesced
}

// parseCmsgs walks the control messages of a received datagram. It knows
// the three the socket asked for and skips any other.
func parseCmsgs(b []byte) rxMeta {
	var m rxMeta
	for len(b) >= cmsgHdrLen {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < cmsgHdrLen || l > len(b) {
			break
		}
		data := b[cmsgHdrLen:l]
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(data) >= 1:
			// The kernel hands the IPv4 TOS up as one byte.
			m.tos = data[0]
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(data) >= 4:
			// The traffic class is an int in host order.
			m.tos = uint8(*(*int32)(unsafe.Pointer(&data[0])))
		case h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(data) >= 4:
			m.seg = int(*(*int32)(unsafe.Pointer(&data[0])))
		case h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(data) >= 2:
			m.seg = int(*(*uint16)(unsafe.Pointer(&data[0])))
		}
		next := unix.CmsgSpace(l - cmsgHdrLen)
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return m
}

// sockaddr is the storage of one address the kernel reads or writes: big
// enough for either family, used as RawSockaddrInet4 on an IPv4 link.
type sockaddr = unix.RawSockaddrInet6

// putSockaddr writes ip:port (port in host order) into sa for the link's
// family. It reports false when ip is of the other family.
func putSockaddr(sa *sockaddr, ip netip.Addr, port [2]byte, v4 bool, scope uint32) bool {
	if v4 {
		if !ip.Is4() {
			if !ip.Is4In6() {
				return false
			}
			ip = ip.Unmap()
		}
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		s4.Family = unix.AF_INET
		*(*[2]byte)(unsafe.Pointer(&s4.Port)) = port
		s4.Addr = ip.As4()
		return true
	}
	if !ip.Is6() || ip.Is4In6() {
		return false
	}
	sa.Family = unix.AF_INET6
	*(*[2]byte)(unsafe.Pointer(&sa.Port)) = port
	sa.Flowinfo = 0
	sa.Addr = ip.As16()
	sa.Scope_id = 0
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
		// A link-local peer is on the link of the local address.
		sa.Scope_id = scope
	}
	return true
}

// addrOf reads the address the kernel wrote into sa.
func addrOf(sa *sockaddr, v4 bool) netip.Addr {
	if v4 {
		return netip.AddrFrom4((*unix.RawSockaddrInet4)(unsafe.Pointer(sa)).Addr)
	}
	return netip.AddrFrom16(sa.Addr)
}

// portOf reads the port the kernel wrote into sa, in host order. Port sits
// at the same offset in both families' sockaddrs.
func portOf(sa *sockaddr) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&sa.Port))
	return uint16(b[0])<<8 | uint16(b[1])
}
