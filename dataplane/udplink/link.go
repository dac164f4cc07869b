package udplink

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/dataplane"
)

// Link is a dataplane.Link over one UDP socket. It has a single owner, the
// engine goroutine: no method is safe for concurrent use except Counters,
// Info, Offloads, Config and LocalAddr.
type Link struct {
	cfg   Config
	fd    int
	v4    bool
	port  [2]byte // cfg.Port in network order, for every sockaddr
	scope uint32  // interface index of a link-local Local, for link-local peers
	gro   bool    // UDP_GRO on: receive slots are groSlot bytes
	// gso (UDP_SEGMENT in use on send) and info change at most once after
	// Open, when the kernel refuses GSO at send time (see SubmitTx); they
	// are atomic so that Offloads and Info may be called from anywhere.
	gso  atomic.Bool
	info atomic.Pointer[dataplane.LinkInfo]

	rx  rxState
	tx  txState
	src srcPool // the send sockets, one per source port (srcports.go)

	// Hot-path scratch for Poll, allocated with the Link.
	pollfd  unix.PollFd
	timeout unix.Timespec

	counters counters
	closed   bool
}

var _ dataplane.Link = (*Link)(nil)

// Counters are the link's own counters. Only the engine goroutine writes
// them, once per batch; any goroutine may read them.
type Counters struct {
	Received   uint64 // packets handed up by Receive (after GRO splitting)
	Sent       uint64 // packets the kernel took in SubmitTx
	Truncated  uint64 // datagrams dropped as longer than MaxPayload (MSG_TRUNC, an oversized GRO segment, or MSG_CTRUNC)
	SendErrors uint64 // packets not sent: refused by the kernel, a Dst of the wrong family, or a Len over MaxPayload
	SendFull   uint64 // packets not sent because the socket buffer was full (EAGAIN)
	RecvErrors uint64 // recvmmsg calls that failed with other than EAGAIN
	RecvCalls  uint64 // recvmmsg calls
	SendCalls  uint64 // sendmmsg calls
	RecvGRO    uint64 // received datagrams that the kernel had coalesced (UDP_GRO) and Receive split
	SentGSO    uint64 // sendmmsg entries that carried a run of packets (UDP_SEGMENT)
}

type counters struct {
	received, sent, truncated, sendErrors, sendFull, recvErrors,
	recvCalls, sendCalls, recvGRO, sentGSO atomic.Uint64
}

// Counters reads the link's counters.
func (l *Link) Counters() Counters {
	c := &l.counters
	return Counters{
		Received:   c.received.Load(),
		Sent:       c.sent.Load(),
		Truncated:  c.truncated.Load(),
		SendErrors: c.sendErrors.Load(),
		SendFull:   c.sendFull.Load(),
		RecvErrors: c.recvErrors.Load(),
		RecvCalls:  c.recvCalls.Load(),
		SendCalls:  c.sendCalls.Load(),
		RecvGRO:    c.recvGRO.Load(),
		SentGSO:    c.sentGSO.Load(),
	}
}

// add bumps a counter by n, skipping the atomic when there is nothing to add.
func add(c *atomic.Uint64, n int) {
	if n != 0 {
		c.Add(uint64(n))
	}
}

// Open creates the socket, binds it to cfg.Local:cfg.Port, turns on TOS
// reception and, if asked, the UDP offloads, and allocates every buffer and
// vector the link will use.
func Open(cfg Config) (*Link, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	l := &Link{cfg: cfg, fd: -1, v4: cfg.Local.Is4()}
	l.port = [2]byte{byte(cfg.Port >> 8), byte(cfg.Port)}
	if z := cfg.Local.Zone(); z != "" {
		ifi, err := net.InterfaceByName(z)
		if err != nil {
			return nil, fmt.Errorf("udplink: zone of %s: %w", cfg.Local, err)
		}
		l.scope = uint32(ifi.Index)
	}
	var notes []string
	err = l.open(&notes)
	if err == nil {
		err = l.openSrcPorts()
	}
	if err != nil {
		if l.fd >= 0 {
			unix.Close(l.fd)
		}
		return nil, err
	}
	slot := cfg.MaxPayload
	if l.gro {
		slot = groSlot
	}
	l.rx.init(cfg.Batch, slot, l.v4)
	l.tx.init(cfg.Batch, cfg.MaxPayload, l.v4, cfg, len(l.src.fds))
	l.pollfd = unix.PollFd{Fd: int32(l.fd), Events: unix.POLLIN}

	l.info.Store(&dataplane.LinkInfo{
		Backend: "udp",
		Iface:   ifaceOf(cfg.Local),
		Why:     l.why(notes),
	})
	return l, nil
}

// open makes and configures the socket; notes collects what Info().Why
// should say about refused options.
func (l *Link) open(notes *[]string) error {
	cfg := l.cfg
	family, sa := unix.AF_INET6, unix.Sockaddr(nil)
	if l.v4 {
		family = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(cfg.Port), Addr: cfg.Local.As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(cfg.Port), Addr: cfg.Local.As16(), ZoneId: l.scope}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return fmt.Errorf("udplink: socket: %w", err)
	}
	l.fd = fd
	if l.v4 {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
	} else {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
		if err == nil {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
		}
	}
	if err != nil {
		return fmt.Errorf("udplink: enable TOS reception: %w", err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fmt.Errorf("udplink: bind %s: %w", netip.AddrPortFrom(cfg.Local, cfg.Port), err)
	}
	for _, b := range []struct {
		name, sysctl  string
		force, normal int
	}{
		{"rcvbuf", "rmem_max", unix.SO_RCVBUFFORCE, unix.SO_RCVBUF},
		{"sndbuf", "wmem_max", unix.SO_SNDBUFFORCE, unix.SO_SNDBUF},
	} {
		// FORCE needs CAP_NET_ADMIN; without it the plain option is capped
		// at net.core.[rw]mem_max. Neither failing is fatal.
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, b.force, sockBuf) != nil {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, b.normal, sockBuf)
		}
		// The kernel reports twice what it granted (the overhead it
		// accounts for).
		if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, b.normal); err == nil && v/2 < sockBuf {
			*notes = append(*notes, fmt.Sprintf("%s %d KiB, capped by net.core.%s", b.name, v/2/1024, b.sysctl))
		}
	}
	// Receive timestamps (SCM_TIMESTAMPNS, taken when the kernel received
	// the packet): the packets' arrival (dataplane.RxPacket.Arrival), so
	// AckDelay and RTT samples leave out the time they wait in the
	// socket for the engine (docs/spec.md §5.1). Refused, packets carry
	// no arrival and the engine stamps them. The first socket of a boot to
	// ask makes the kernel turn stamping on in a deferred work item; the
	// packets received before it has run are stamped when they are read
	// (measured: 20 ms of socket wait hidden on a busy CI machine), so a
	// freshly started daemon's first samples may count host delay as
	// fabric delay, once.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		*notes = append(*notes, fmt.Sprintf("no receive timestamps: SO_TIMESTAMPNS: %v", err))
	}
	if cfg.GSO {
		// getsockopt UDP_SEGMENT exists exactly where sending with it does
		// (Linux 4.18); EIO at send time (no checksum offload on the route's
		// device) turns it off later.
		if _, err := unix.GetsockoptInt(fd, unix.SOL_UDP, unix.UDP_SEGMENT); err != nil {
			*notes = append(*notes, fmt.Sprintf("GSO off: UDP_SEGMENT: %v", err))
		} else {
			l.gso.Store(true)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_GRO, 1); err != nil {
			*notes = append(*notes, fmt.Sprintf("GRO off: UDP_GRO: %v", err))
		} else {
			l.gro = true
		}
	}
	return nil
}

// why is the LinkInfo.Why of a freshly opened link.
func (l *Link) why(notes []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "udp socket on %s, batch %d via recvmmsg/sendmmsg; ",
		netip.AddrPortFrom(l.cfg.Local, l.cfg.Port), l.cfg.Batch)
	if lo, hi, ok := l.SrcPortRange(); ok {
		fmt.Fprintf(&b, "path entropy: %d send sockets on source ports %d..%d, each packet from the port "+
			"its path picked (ECMP spreads them), one sendmmsg per socket a batch touches", hi-lo+1, lo, hi)
	} else {
		b.WriteString("no path entropy: source-port pool off (SrcPorts 0), so every packet leaves from the " +
			"MetaRoCE port, TxPacket.SrcPort is ignored and ECMP does not spread this link's packets")
	}
	fmt.Fprintf(&b, "; GSO %s, GRO %s", onOff(l.gso.Load()), onOff(l.gro))
	for _, n := range notes {
		b.WriteString("; ")
		b.WriteString(n)
	}
	return b.String()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// ifaceOf names the interface that holds addr, or "" (cold path, best effort:
// the socket is bound to an address, not a device).
func ifaceOf(addr netip.Addr) string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifi := range ifs {
		as, err := ifi.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr.WithZone("") {
					return ifi.Name
				}
			}
		}
	}
	return ""
}

// Info describes the link. Why says which source ports the link sends from
// (its path entropy), which offloads are on, and which socket options the
// kernel capped or refused.
func (l *Link) Info() dataplane.LinkInfo { return *l.info.Load() }

// Config returns the configuration with every default filled in.
func (l *Link) Config() Config { return l.cfg }

// Offloads reports whether UDP GSO (send) and GRO (receive) are in use. GSO
// can turn off after Open, when the kernel refuses it at send time.
func (l *Link) Offloads() (gso, gro bool) { return l.gso.Load(), l.gro }

// LocalAddr is the address and port the socket is bound to.
func (l *Link) LocalAddr() netip.AddrPort { return netip.AddrPortFrom(l.cfg.Local, l.cfg.Port) }

// PollFD is the socket, for an engine that sleeps on it beside other
// descriptors (dataplane.PollFDer); ready while datagrams of an earlier
// recvmmsg wait to be handed out.
func (l *Link) PollFD() (int, bool) { return l.fd, l.rx.pending() }

// Poll blocks until the socket is readable or timeout passes, in one ppoll
// (so sub-millisecond timeouts are honoured). A timeout of 0 returns at
// once; a negative one waits for ever. It returns at once, without a
// syscall, while datagrams of an earlier recvmmsg are still waiting to be
// handed out (a GRO batch larger than the caller's). A signal interrupting
// the wait is not an error: Poll may return early.
func (l *Link) Poll(timeout time.Duration) error {
	if l.closed {
		return net.ErrClosed
	}
	if l.rx.pending() || timeout == 0 {
		return nil
	}
	ts := &l.timeout
	if timeout < 0 {
		ts = nil
	} else {
		*ts = unix.NsecToTimespec(int64(timeout))
	}
	l.pollfd.Revents = 0
	switch e := ppoll(&l.pollfd, ts); e {
	case 0, unix.EINTR:
		return nil
	default:
		return fmt.Errorf("udplink: poll: %w", e)
	}
}

// Close closes the socket and the send sockets. The link's buffers stay
// valid for packets the engine still holds (they are ordinary Go memory);
// Receive then returns 0, SubmitTx and Poll return net.ErrClosed. Close is
// idempotent.
func (l *Link) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	perr := l.closeSrcPorts()
	err := unix.Close(l.fd)
	l.fd = -1
	if err != nil {
		return errors.Join(fmt.Errorf("udplink: close %s: %w", l.LocalAddr(), err), perr)
	}
	return perr
}

// errClosed is what SubmitTx returns on a closed link.
var errClosed = fmt.Errorf("udplink: %w", net.ErrClosed)

// fatal reports whether a send errno means the link itself is unusable
// rather than one packet refused.
func fatal(e unix.Errno) bool {
	return e == unix.EBADF || e == unix.ENOTSOCK || e == unix.EFAULT
}

// ptr is a *byte for an Msghdr field.
func ptr[T any](p *T) *byte { return (*byte)(unsafe.Pointer(p)) }
