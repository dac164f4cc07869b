package testnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Ping sends one ICMP (or ICMPv6) echo request from inside the namespace to
// dst and waits up to timeout for the matching reply. It uses a raw socket
// (root), since iputils ping is not installed on these machines and
// unprivileged ICMP sockets are off in a new namespace (ping_group_range).
func (ns *Namespace) Ping(dst netip.Addr, timeout time.Duration) error {
	return ns.Do(func() error { return ping(dst, timeout) })
}

// icmpID is the echo identifier; the low 16 bits of the pid keep concurrent
// test binaries apart.
var icmpID = uint16(os.Getpid())

func ping(dst netip.Addr, timeout time.Duration) error {
	dst = dst.Unmap()
	family, proto, reqType, repType := unix.AF_INET, unix.IPPROTO_ICMP, byte(8), byte(0)
	if dst.Is6() {
		family, proto, reqType, repType = unix.AF_INET6, unix.IPPROTO_ICMPV6, 128, 129
	}
	fd, err := unix.Socket(family, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return fmt.Errorf("testnet: ping socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(10 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}

	seq := uint16(counter.Add(1))
	msg := make([]byte, 16)
	msg[0] = reqType
	binary.BigEndian.PutUint16(msg[4:], icmpID)
	binary.BigEndian.PutUint16(msg[6:], seq)
	copy(msg[8:], "metaroce")
	var sa unix.Sockaddr
	if dst.Is6() {
		// The kernel computes the ICMPv6 checksum on raw ICMPv6 sockets.
		sa = &unix.SockaddrInet6{Addr: dst.As16()}
	} else {
		binary.BigEndian.PutUint16(msg[2:], inetChecksum(msg))
		sa = &unix.SockaddrInet4{Addr: dst.As4()}
	}
	if err := unix.Sendto(fd, msg, 0, sa); err != nil {
		return fmt.Errorf("testnet: ping %s: %w", dst, err)
	}

	buf := make([]byte, 1500)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("testnet: ping %s: %w", dst, err)
		}
		b := buf[:n]
		if !dst.Is6() {
			// IPv4 raw sockets deliver the IP header too.
			if len(b) < 20 {
				continue
			}
			b = b[int(b[0]&0x0f)*4:]
		}
		if len(b) >= 8 && b[0] == repType &&
			binary.BigEndian.Uint16(b[4:]) == icmpID && binary.BigEndian.Uint16(b[6:]) == seq {
			return nil
		}
	}
	return fmt.Errorf("testnet: ping %s: no reply within %v", dst, timeout)
}

// inetChecksum is the RFC 1071 one's-complement sum.
func inetChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
