package compliance

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/wire"
)

// TOS bytes the suite sends with: every MetaRoCE packet is ECN-capable,
// ECT(0) (§2.4); the ECN cases mark theirs CE, as a congested switch would.
const (
	ecnMask = 0x03
	ecnECT0 = 0x02
	ecnCE   = 0x03
)

// rxPacket is one UDP datagram the suite received.
type rxPacket struct {
	b    []byte
	from netip.AddrPort
	to   netip.Addr // the local address it arrived at
	tos  uint8      // IPv4 TOS or IPv6 traffic class; tosKnown says whether the kernel reported it
	tosK bool
	at   time.Time
	pkt  wire.Packet
	err  error // wire.Parse's verdict
	used bool  // an expectation consumed it
}

func (p *rxPacket) String() string {
	if p.err != nil {
		return fmt.Sprintf("%d bytes from %v (%v)", len(p.b), p.from, p.err)
	}
	return fmt.Sprintf("%v from %v", p.pkt.Prefix().Opcode(), p.from)
}

// peer owns the suite's sockets. The receive loop is the only reader of
// the receive sockets; sending sockets are created on demand, one per
// (local address, source port, TOS), and cached.
type peer struct {
	opts *Options
	rx   []*net.UDPConn
	in   chan *rxPacket
	mu   sync.Mutex
	tx   map[txKey]*net.UDPConn
	done chan struct{}
}

type txKey struct {
	local netip.Addr
	port  uint16
	nock  bool
	frag  bool
}

func newPeer(o *Options) (*peer, error) {
	p := &peer{opts: o, in: make(chan *rxPacket, 16384), tx: map[txKey]*net.UDPConn{}, done: make(chan struct{})}
	locals := []netip.Addr{o.Local}
	if o.AltLocal.IsValid() {
		locals = append(locals, o.AltLocal)
	}
	for _, l := range locals {
		c, err := o.Listen(network(l), netip.AddrPortFrom(l, o.Port))
		if err != nil {
			p.close()
			return nil, fmt.Errorf("listen on %v port %d: %w", l, o.Port, err)
		}
		if err := setRecvTOS(c, l.Is4()); err != nil {
			c.Close()
			p.close()
			return nil, err
		}
		p.rx = append(p.rx, c)
		go p.receive(c, l)
	}
	return p, nil
}

func network(a netip.Addr) string {
	if a.Is4() {
		return "udp4"
	}
	return "udp6"
}

func setRecvTOS(c *net.UDPConn, v4 bool) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if v4 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
		}
		// The kernel's receive time: the rate cases measure when replies
		// arrived, not when a loaded suite got round to reading them.
		serr = errors.Join(serr, unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1))
	})
	return errors.Join(err, serr)
}

func (p *peer) receive(c *net.UDPConn, local netip.Addr) {
	buf := make([]byte, 65536)
	oob := make([]byte, 256)
	for {
		n, oobn, _, from, err := c.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		r := &rxPacket{b: append([]byte(nil), buf[:n]...), from: from, to: local, at: time.Now()}
		r.tos, r.tosK = tosOf(oob[:oobn])
		if t, ok := kernelTime(oob[:oobn]); ok {
			r.at = t
		}
		r.pkt, r.err = wire.Parse(r.b)
		select {
		case p.in <- r:
		default: // a flood case overran the queue: the excess is not needed
		}
	}
}

// tosOf takes the TOS or traffic class out of the control messages; the
// parsing is x/sys's, the suite only picks the value.
func tosOf(oob []byte) (uint8, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TOS && len(m.Data) >= 1:
			return m.Data[0], true
		case m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_TCLASS && len(m.Data) >= 4:
			return uint8(nativeInt(m.Data)), true
		}
	}
	return 0, false
}

// kernelTime takes SO_TIMESTAMPNS's receive time out of the control
// messages.
func kernelTime(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(uint64(uint32(nativeInt(m.Data[0:4]))) | uint64(uint32(nativeInt(m.Data[4:8])))<<32)
			nsec := int64(uint64(uint32(nativeInt(m.Data[8:12]))) | uint64(uint32(nativeInt(m.Data[12:16])))<<32)
			return time.Unix(sec, nsec), true
		}
	}
	return time.Time{}, false
}

func nativeInt(b []byte) int32 {
	// cmsg ints are host order; every platform this runs on is little endian.
	return int32(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}

// sendOpts choose how one packet leaves.
type sendOpts struct {
	sport   uint16     // UDP source port (the path entropy); 0: the suite's port
	ce      bool       // mark CE instead of ECT(0)
	from    netip.Addr // local address; zero: Options.Local
	noCheck bool       // send a zero UDP checksum (SO_NO_CHECK, UDP_NO_CHECK6_TX)
	frag    bool       // IPv4 only: DF clear, so the kernel fragments what exceeds the MTU
}

// send sends b to the target's port.
func (p *peer) send(b []byte, so sendOpts) error {
	from := so.from
	if !from.IsValid() {
		from = p.opts.Local
	}
	tos := uint8(ecnECT0)
	if so.ce {
		tos = ecnCE
	}
	port := so.sport
	if port == 0 {
		port = p.opts.Port
	}
	c, err := p.sender(txKey{local: from, port: port, nock: so.noCheck, frag: so.frag})
	if err != nil {
		return err
	}
	// The TOS byte goes with each packet (an IP_TOS or IPV6_TCLASS
	// control message), so one socket per source port serves ECT(0) and
	// CE alike: two sockets cannot share a port.
	_, _, err = c.WriteMsgUDPAddrPort(b, tosCmsg(from.Is4(), tos), netip.AddrPortFrom(p.opts.Target, p.opts.Port))
	return err
}

// sendSegments sends b, a run of equal-size packets of seg bytes each, in
// one call with UDP GSO (UDP_SEGMENT): the kernel cuts it into datagrams.
// The flood case needs a send rate well above a target's reply limit,
// which one syscall per datagram does not reach on a loaded machine.
func (p *peer) sendSegments(b []byte, seg int, so sendOpts) error {
	from := so.from
	if !from.IsValid() {
		from = p.opts.Local
	}
	port := so.sport
	if port == 0 {
		port = p.opts.Port
	}
	c, err := p.sender(txKey{local: from, port: port})
	if err != nil {
		return err
	}
	oob := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = uint16(seg)
	oob = append(oob, tosCmsg(from.Is4(), ecnECT0)...)
	_, _, err = c.WriteMsgUDPAddrPort(b, oob, netip.AddrPortFrom(p.opts.Target, p.opts.Port))
	return err
}

// tosCmsg builds the control message that sets one packet's TOS.
func tosCmsg(v4 bool, tos uint8) []byte {
	b := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	if v4 {
		h.Level, h.Type = unix.IPPROTO_IP, unix.IP_TOS
	} else {
		h.Level, h.Type = unix.IPPROTO_IPV6, unix.IPV6_TCLASS
	}
	h.SetLen(unix.CmsgLen(4))
	*(*int32)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = int32(tos)
	return b
}

func (p *peer) sender(k txKey) (*net.UDPConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.tx[k]; c != nil {
		return c, nil
	}
	// A second socket on the receive port would steal replies: packets
	// from the suite's own port leave through the receive socket.
	if k.port == p.opts.Port && !k.nock && !k.frag {
		for i, c := range p.rx {
			if (i == 0 && k.local == p.opts.Local) || (i == 1 && k.local == p.opts.AltLocal) {
				return c, nil
			}
		}
	}
	c, err := p.opts.Listen(network(k.local), netip.AddrPortFrom(k.local, k.port))
	if err != nil {
		return nil, fmt.Errorf("send socket %v:%d: %w", k.local, k.port, err)
	}
	if k.nock {
		rc, err := c.SyscallConn()
		if err == nil {
			var serr error
			err = rc.Control(func(fd uintptr) {
				if k.local.Is4() {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1)
				} else {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_NO_CHECK6_TX, 1)
				}
			})
			err = errors.Join(err, serr)
		}
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	if k.frag {
		rc, err := c.SyscallConn()
		if err == nil {
			var serr error
			err = rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DONT)
			})
			err = errors.Join(err, serr)
		}
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	p.tx[k] = c
	// Nothing should arrive here (replies go to the MetaRoCE port, §2.2);
	// the reply-port case reads these sockets to check that.
	return c, nil
}

// strayOn reports whether any datagram waits on the sending socket of
// source port sport (replies must go to the MetaRoCE port, §2.2).
func (p *peer) strayOn(sport uint16, wait time.Duration) (bool, error) {
	p.mu.Lock()
	c := p.tx[txKey{local: p.opts.Local, port: sport}]
	p.mu.Unlock()
	if c == nil {
		return false, errors.New("no socket on that port")
	}
	c.SetReadDeadline(time.Now().Add(wait))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, 2048)
	_, _, err := c.ReadFromUDPAddrPort(buf)
	if err == nil {
		return true, nil
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, nil
	}
	return false, err
}

func (p *peer) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.rx {
		c.Close()
	}
	for _, c := range p.tx {
		c.Close()
	}
}
