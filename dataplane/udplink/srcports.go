package udplink

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Source ports: the send-socket pool of the package doc ("Path entropy").
// With Config.SrcPorts = n, the link owns n consecutive ports lo..lo+n-1 on
// Local, one send-only socket bound to each, and sends each packet from the
// socket of its TxPacket.SrcPort. The transport is given lo..lo+n-1 as its
// entropy range, so every entropy value it picks is one of these ports; a
// port outside the range (an ack echoing the entropy of a peer that uses
// another range) maps onto the pool by (port - lo) mod n, the same socket
// every time, so one echoed value still takes one route.
//
// The send sockets receive nothing: peers always send to Config.Port, and
// the main socket is the only one bound to it. Anything else addressed to a
// pool port (a stray, a scan) is dropped by the kernel before it queues: each
// send socket carries a classic BPF filter that accepts no packet, attached
// before the bind so that not even a datagram racing the bind can queue.
// So the pool costs no receive memory and needs no draining.

// srcPool is the link's send sockets. Only the engine goroutine uses it
// after Open.
type srcPool struct {
	lo  uint16 // fds[i] sends from port lo+i
	fds []int  // fds[0] is the main socket when the pool is off
	// main is the index in fds of the main socket when Port lies inside
	// lo..lo+n-1 (the main socket then sends from its own port), or -1.
	main int
}

// index is the pool entry that sends a packet with this entropy value. It
// is the identity on lo..lo+n-1 and wraps anything else onto it.
func (p *srcPool) index(port uint16) int { return int(port-p.lo) % len(p.fds) }

// openSrcPorts builds the pool: the first window of SrcPorts consecutive
// ports in SrcPortMin..SrcPortMax that all bind on Local, sliding past a
// port in use (EADDRINUSE) and failing on any other error. Cold path.
func (l *Link) openSrcPorts() error {
	cfg := l.cfg
	n := cfg.SrcPorts
	if n == 0 {
		l.src = srcPool{fds: []int{l.fd}}
		return nil
	}
	for start := int(cfg.SrcPortMin); start+n-1 <= int(cfg.SrcPortMax); {
		fds, main, busy, err := l.bindWindow(start, n)
		if err == nil {
			l.src = srcPool{lo: uint16(start), fds: fds, main: main}
			return nil
		}
		if busy < 0 {
			return err
		}
		start = busy + 1
	}
	return fmt.Errorf("udplink: no %d consecutive free source ports on %s in %d..%d",
		n, cfg.Local, cfg.SrcPortMin, cfg.SrcPortMax)
}

// bindWindow binds a send socket to each of the n ports from start on. On
// failure it closes what it opened and returns the error, with busy the
// port that was in use (EADDRINUSE) or -1 for any other error.
func (l *Link) bindWindow(start, n int) (fds []int, main, busy int, err error) {
	fds, main = make([]int, 0, n), -1
	for port := start; port < start+n; port++ {
		if port == int(l.cfg.Port) {
			main = len(fds)
			fds = append(fds, l.fd)
			continue
		}
		fd, err := l.sendSocket(uint16(port))
		if err != nil {
			for _, f := range fds {
				if f != l.fd {
					unix.Close(f)
				}
			}
			if errors.Is(err, unix.EADDRINUSE) {
				return nil, -1, port, err
			}
			return nil, -1, -1, err
		}
		fds = append(fds, fd)
	}
	return fds, main, -1, nil
}

// dropAll is a classic BPF socket filter that accepts no packet (return 0
// bytes): what a send socket's receive queue gets.
var dropAll = []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}

// sendSocket opens a non-blocking UDP socket that drops everything it would
// receive, bound to Local:port, with the main socket's send buffer.
func (l *Link) sendSocket(port uint16) (int, error) {
	cfg := l.cfg
	ap := netip.AddrPortFrom(cfg.Local, port)
	family, sa := unix.AF_INET6, unix.Sockaddr(nil)
	if l.v4 {
		family = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(port), Addr: cfg.Local.As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(port), Addr: cfg.Local.As16(), ZoneId: l.scope}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, fmt.Errorf("udplink: send socket for source port %s: %w", ap, err)
	}
	fail := func(what string, err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("udplink: send socket for source port %s: %s: %w", ap, what, err)
	}
	if !l.v4 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return fail("IPV6_V6ONLY", err)
		}
	}
	prog := unix.SockFprog{Len: uint16(len(dropAll)), Filter: &dropAll[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
		return fail("attach the drop-all filter", err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	// As for the main socket (Open); what was granted is said once, for it.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sockBuf) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, sockBuf)
	}
	return fd, nil
}

// closeSrcPorts closes the send sockets (not the main socket).
func (l *Link) closeSrcPorts() error {
	var errs []error
	for i, fd := range l.src.fds {
		if fd == l.fd || fd < 0 {
			continue
		}
		if err := unix.Close(fd); err != nil {
			errs = append(errs, fmt.Errorf("udplink: close send socket of port %d: %w", int(l.src.lo)+i, err))
		}
		l.src.fds[i] = -1
	}
	return errors.Join(errs...)
}

// SrcPortRange is the ports the link sends from, lo..hi, and ok false when
// it has no pool (Config.SrcPorts 0: every packet leaves from Port). Give
// lo..hi to the transport as its entropy range (transport.Config.EntropyMin,
// EntropyMax), so that every entropy value it picks is a port the link can
// send from.
func (l *Link) SrcPortRange() (lo, hi uint16, ok bool) {
	if l.cfg.SrcPorts == 0 {
		return 0, 0, false
	}
	return l.src.lo, l.src.lo + uint16(len(l.src.fds)-1), true
}
