package udplink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/dataplane"
)

// Every test talks over loopback only: 127.0.0.0/8 is all local on Linux,
// so each IPv4 endpoint gets its own 127.0.0.x and they share one port, as
// real endpoints do. IPv6 loopback has only ::1, so IPv6 tests send a link's
// packets to itself.

var (
	lo1 = netip.MustParseAddr("127.0.0.1")
	lo2 = netip.MustParseAddr("127.0.0.2")
	lo3 = netip.MustParseAddr("127.0.0.3")
	lo6 = netip.MustParseAddr("::1")
)

// openLinks opens one link per config, all on one free port (tests run in
// parallel with other packages, so the port is picked at random and
// retried on EADDRINUSE).
func openLinks(tb testing.TB, cfgs ...Config) []*Link {
	tb.Helper()
	for range 100 {
		port := uint16(20000 + rand.IntN(40000))
		links, err := openAll(port, cfgs)
		if errors.Is(err, unix.EADDRINUSE) {
			continue
		}
		if errors.Is(err, unix.EADDRNOTAVAIL) {
			tb.Skipf("loopback address missing: %v", err)
		}
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			for _, l := range links {
				l.Close()
			}
		})
		return links
	}
	tb.Fatal("no free port for the test links")
	return nil
}

func openAll(port uint16, cfgs []Config) ([]*Link, error) {
	var links []*Link
	for _, c := range cfgs {
		c.Port = port
		l, err := Open(c)
		if err != nil {
			for _, o := range links {
				o.Close()
			}
			return nil, err
		}
		links = append(links, l)
	}
	return links, nil
}

// fill writes a packet that says which one it is: a 4-byte sequence number,
// then bytes derived from it, so that any misplaced byte is caught.
func fill(b []byte, seq uint32) {
	var s [4]byte
	binary.BigEndian.PutUint32(s[:], seq)
	for i := range b {
		if i < 4 {
			b[i] = s[i]
		} else {
			b[i] = byte(seq*7 + uint32(i))
		}
	}
}

func want(seq uint32, n int) []byte {
	b := make([]byte, n)
	fill(b, seq)
	return b
}

// pktLen is the length of packet seq in the exchange tests: every length
// from 1 to max shows up.
func pktLen(seq uint32, max int) int { return 1 + int(seq*131)%max }

// sendBatch reserves, writes and submits packets seq..seq+n-1 to dst.
func sendBatch(tb testing.TB, l *Link, dst netip.Addr, seq uint32, n int, length func(uint32) int) {
	tb.Helper()
	batch := make([]dataplane.TxPacket, n)
	if got := l.ReserveTx(batch); got != n {
		tb.Fatalf("ReserveTx = %d, want %d", got, n)
	}
	for i := range batch {
		p := &batch[i]
		p.Len = length(seq + uint32(i))
		fill(p.Buf[:p.Len], seq+uint32(i))
		p.Dst = dst
		p.SrcPort = uint16(49152 + i) // ignored by this backend
	}
	if err := l.SubmitTx(batch); err != nil {
		tb.Fatal(err)
	}
}

// got is a received packet, copied out of the link.
type got struct {
	payload []byte
	from    netip.Addr
	ce      bool
}

// recvN receives until n packets have come or the link stays silent for a
// long while (a failure, not a timing assertion), with batches of size bs.
func recvN(tb testing.TB, l *Link, n, bs int) []got {
	tb.Helper()
	var out []got
	batch := make([]dataplane.RxPacket, bs)
	idle := 0
	for len(out) < n {
		k := l.Receive(batch)
		if k == 0 {
			if idle++; idle > 50 {
				tb.Fatalf("received %d packets, want %d", len(out), n)
			}
			if err := l.Poll(100 * time.Millisecond); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		idle = 0
		for _, p := range batch[:k] {
			out = append(out, got{bytes.Clone(p.Payload), p.From, p.CE})
		}
		l.Release(batch[:k])
	}
	return out
}

// checkSeq compares received packets with packets seq.. in order.
func checkSeq(tb testing.TB, pkts []got, seq uint32, from netip.Addr, length func(uint32) int) {
	tb.Helper()
	for i, p := range pkts {
		s := seq + uint32(i)
		if w := want(s, length(s)); !bytes.Equal(p.payload, w) {
			tb.Fatalf("packet %d: %d bytes %x..., want %d bytes %x...", s, len(p.payload),
				p.payload[:min(8, len(p.payload))], len(w), w[:min(8, len(w))])
		}
		if p.from != from {
			tb.Fatalf("packet %d from %s, want %s", s, p.from, from)
		}
	}
}

// plainSocket is an ordinary UDP socket on addr:port, for playing a peer
// the link does not control (crafted TOS, oversized datagrams), with TOS
// reception on.
func plainSocket(tb testing.TB, addr netip.Addr, port uint16) int {
	tb.Helper()
	var family, sa = unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: int(port), Addr: addr.As16()})
	if addr.Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(port), Addr: addr.As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	if family == unix.AF_INET {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
	} else {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
	}
	if err != nil {
		tb.Fatal(err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		tb.Fatal(err)
	}
	// Never block a test for ever.
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		tb.Fatal(err)
	}
	return fd
}

// sendTOS sends payload from fd to dst with the given TOS byte as a control
// message.
func sendTOS(tb testing.TB, fd int, dst netip.AddrPort, payload []byte, tos int) {
	tb.Helper()
	oob := make([]byte, unix.CmsgSpace(4))
	var sa unix.Sockaddr
	if dst.Addr().Is4() {
		putCmsgHdr(oob, unix.IPPROTO_IP, unix.IP_TOS, 4)
		sa = &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}
	} else {
		putCmsgHdr(oob, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, 4)
		sa = &unix.SockaddrInet6{Port: int(dst.Port()), Addr: dst.Addr().As16()}
	}
	binary.NativeEndian.PutUint32(oob[cmsgHdrLen:], uint32(tos))
	if err := unix.Sendmsg(fd, payload, oob, sa, 0); err != nil {
		tb.Fatal(err)
	}
}

// recvTOS receives one datagram on fd and returns it with its TOS byte.
func recvTOS(tb testing.TB, fd int) ([]byte, uint8) {
	tb.Helper()
	buf, oob := make([]byte, 1<<16), make([]byte, 128)
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return buf[:n], parseCmsgs(oob[:oobn]).tos
}
