package udplink

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/dataplane"
)

// Transmit side. There are Batch transmit slots of MaxPayload bytes.
// ReserveTx hands out free slots; SubmitTx sends the packets written into
// them and takes every slot of its batch back at once, sent or not, because
// sendmmsg has copied the data by the time it returns. A packet's Handle
// names its slot and the slot's generation; SubmitTx panics on a handle that
// is not a reserved slot of this link (submitted twice, or foreign).
//
// Sockets: SubmitTx first sorts the batch's packets by the send socket of
// their SrcPort (srcports.go), stably, so each socket's packets keep their
// order; then each socket the batch touches is one sendmmsg of its packets.
// Without a source-port pool there is one socket and one sendmmsg. It makes
// more only on the error path: the kernel stops a sendmmsg at the first
// entry it refuses, so SubmitTx counts that entry's packets as SendErrors
// and sends the socket's rest with one more call (EAGAIN, a full socket
// buffer, ends that socket's share of the batch instead).
//
// GSO: with UDP_SEGMENT on, a run of consecutive packets of one socket to
// the same destination, of the same class and the same length (the last may
// be shorter) becomes one sendmmsg entry: one iovec per packet, a
// UDP_SEGMENT cmsg with the length, and the kernel cuts it into the same
// datagrams it would have sent one by one. Sorting by socket first means a
// path's packets form runs even when the transport interleaved them with
// other paths' (it sprays consecutive packets onto different paths). A run
// is bounded by maxGSOSegments and by the largest UDP datagram. If the
// kernel refuses a run (EINVAL: the segment does not fit the route's MTU;
// EIO: the device cannot checksum), the rest of the batch goes out without
// GSO; after EIO, GSO stays off for good.

type txState struct {
	v4         bool
	maxPayload int
	maxGSO     int      // longest UDP payload of one GSO entry
	nameLen    uint32   // sockaddr length for the family
	tos        [2]int32 // TOS or traffic class of data [0] and control [1] packets

	slots []txSlot
	free  []uint32 // stack of free slot indexes

	// The sendmmsg vector and its entries. Entry j always uses ctl[j]; its
	// name and iovecs are set per call.
	vec []unix.Mmsghdr
	iov []unix.Iovec
	ctl [][]byte
	ent []txEntry

	// Grouping by socket, per SubmitTx: order holds the batch indexes of
	// the packets to send, socket by socket; groups[g] is one socket's
	// range of it, in the order the sockets first appear in the batch;
	// group[s] is socket s's group, or -1 (reset after every batch).
	order  []int32
	sock   []uint16 // pool index of batch[i]
	groups []txGroup
	group  []int32
}

// txGroup is the packets of one send socket in a batch: order[lo:hi].
type txGroup struct {
	sock   int
	lo, hi int
}

type txSlot struct {
	buf      []byte
	gen      uint32 // 31 bits, see txHandle
	reserved bool   // handed out by ReserveTx and not yet submitted
	ok       bool   // during SubmitTx: to be sent
	name     sockaddr
}

// txEntry is one sendmmsg entry: count packets, from position first on of
// the order slice given to build.
type txEntry struct {
	first, count int
	slot         uint32 // slot of the first packet, whose name the entry uses
	iov          int    // first iovec
	seg, bytes   int    // packet length of the run, total bytes
	open         bool   // the run may grow (no shorter packet ended it)
	dst          netip.Addr
	control      bool
}

// txTag marks transmit handles, so that a receive handle given to SubmitTx
// (or the reverse) is caught.
const txTag = 1 << 63

func txHandle(s, gen uint32) uint64 { return txTag | uint64(gen)<<32 | uint64(s) }

func (t *txState) init(batch, maxPayload int, v4 bool, cfg Config, sockets int) {
	t.v4, t.maxPayload = v4, maxPayload
	t.maxGSO, t.nameLen = maxDatagram6, unix.SizeofSockaddrInet6
	level, typ := int32(unix.IPPROTO_IPV6), int32(unix.IPV6_TCLASS)
	if v4 {
		t.maxGSO, t.nameLen = maxDatagram4, unix.SizeofSockaddrInet4
		level, typ = unix.IPPROTO_IP, unix.IP_TOS
	}
	// Both classes are ECN-capable, ECT(0) (RFC 3168): the fabric marks CE
	// instead of dropping, and the receiver echoes it.
	t.tos = [2]int32{int32(cfg.DSCPData)<<2 | ecnECT0, int32(cfg.DSCPControl)<<2 | ecnECT0}

	t.slots = make([]txSlot, batch)
	t.free = make([]uint32, 0, batch)
	mem := make([]byte, batch*maxPayload)
	for i := range t.slots {
		t.slots[i] = txSlot{buf: mem[i*maxPayload : (i+1)*maxPayload : (i+1)*maxPayload], gen: 1}
		t.free = append(t.free, uint32(batch-1-i))
	}
	t.vec = make([]unix.Mmsghdr, batch)
	t.iov = make([]unix.Iovec, batch)
	t.ctl = ctlBufs(batch, txCtlLen)
	t.ent = make([]txEntry, batch)
	t.order = make([]int32, batch)
	t.sock = make([]uint16, batch)
	t.groups = make([]txGroup, 0, min(batch, sockets))
	t.group = make([]int32, sockets)
	for s := range t.group {
		t.group[s] = -1
	}
	for j := range t.ctl {
		// The headers never change; SubmitTx writes the values and sets
		// Controllen to cover the segment cmsg or not.
		putCmsgHdr(t.ctl[j], level, typ, 4)
		putCmsgHdr(t.ctl[j][cmsgInt:], unix.SOL_UDP, unix.UDP_SEGMENT, 2)
	}
}

// ReserveTx hands out up to len(batch) free transmit slots, each with Buf
// set to MaxPayload bytes, and returns how many (fewer when earlier
// reservations have not been submitted yet). Every other field is reset.
func (l *Link) ReserveTx(batch []dataplane.TxPacket) int {
	t := &l.tx
	n := min(len(batch), len(t.free))
	top := len(t.free)
	for i := range n {
		s := t.free[top-1-i]
		sl := &t.slots[s]
		sl.gen = (sl.gen + 1) & 0x7fffffff
		if sl.gen == 0 {
			sl.gen = 1
		}
		sl.reserved = true
		batch[i] = dataplane.TxPacket{Buf: sl.buf, Handle: txHandle(s, sl.gen)}
	}
	t.free = t.free[:top-n]
	return n
}

// claim checks that h is a reserved slot and takes it back from the engine.
func (t *txState) claim(h uint64) uint32 {
	s, gen := uint32(h), uint32(h>>32)&0x7fffffff
	if h&txTag == 0 || int(s) >= len(t.slots) || t.slots[s].gen != gen || !t.slots[s].reserved {
		panic("udplink: SubmitTx of a packet this link did not reserve (submitted twice, or a foreign handle)")
	}
	t.slots[s].reserved = false
	return s
}

// SubmitTx sends the packets whose Len is nonzero, to Dst at the link's
// Port, with the data or control DSCP and ECT(0), from the send socket of
// its SrcPort (the main socket, from Port, without a source-port pool: see
// the package doc), and takes back every slot of batch. A packet with a Len
// over MaxPayload or a Dst of the other family is not sent and counts as a
// SendError; so does one the kernel refuses. It returns an error only when
// the link itself is unusable (closed, or a bad descriptor).
func (l *Link) SubmitTx(batch []dataplane.TxPacket) error {
	t := &l.tx
	live, bad := 0, 0
	for i := range batch {
		p := &batch[i]
		sl := &t.slots[t.claim(p.Handle)]
		sl.ok = false
		if p.Len == 0 {
			continue
		}
		if p.Len < 0 || p.Len > t.maxPayload || !putSockaddr(&sl.name, p.Dst, l.port, t.v4, l.scope) {
			bad++
			continue
		}
		sl.ok = true
		live++
	}
	var err error
	if l.closed {
		err = errClosed
	} else if live > 0 {
		err = l.send(batch)
	}
	add(&l.counters.sendErrors, bad)
	for i := range batch {
		t.free = append(t.free, uint32(batch[i].Handle))
	}
	return err
}

// send groups the batch by socket and sends each group, as the comment at
// the top says.
func (l *Link) send(batch []dataplane.TxPacket) error {
	t := &l.tx
	t.groupBy(batch, &l.src)
	var n txTally
	var err error
	gso := l.gso.Load()
	for gi, g := range t.groups {
		if err = l.sendGroup(l.src.fds[g.sock], batch, t.order[g.lo:g.hi], &gso, &n); err != nil {
			// The link is unusable: nothing else goes out.
			for _, r := range t.groups[gi+1:] {
				n.failed += r.hi - r.lo
			}
			break
		}
	}
	for _, g := range t.groups {
		t.group[g.sock] = -1
	}
	c := &l.counters
	add(&c.sendCalls, n.calls)
	add(&c.sent, n.sent)
	add(&c.sentGSO, n.runs)
	add(&c.sendErrors, n.failed)
	add(&c.sendFull, n.full)
	return err
}

// txTally is what one SubmitTx did, added to the counters once.
type txTally struct{ sent, failed, full, calls, runs int }

// groupBy sorts the indexes of batch's packets marked ok by the pool
// socket of their SrcPort into t.order, stably (two passes of a counting
// sort), with t.groups the sockets' ranges in order of first appearance.
func (t *txState) groupBy(batch []dataplane.TxPacket, src *srcPool) {
	t.groups = t.groups[:0]
	for i := range batch {
		if !t.slots[uint32(batch[i].Handle)].ok {
			continue
		}
		s := src.index(batch[i].SrcPort)
		t.sock[i] = uint16(s)
		g := t.group[s]
		if g < 0 {
			g = int32(len(t.groups))
			t.group[s] = g
			t.groups = append(t.groups, txGroup{sock: s})
		}
		t.groups[g].hi++ // a count until the offsets below
	}
	off := 0
	for j := range t.groups {
		g := &t.groups[j]
		n := g.hi
		g.lo, g.hi = off, off
		off += n
	}
	for i := range batch {
		if !t.slots[uint32(batch[i].Handle)].ok {
			continue
		}
		g := &t.groups[t.group[t.sock[i]]]
		t.order[g.hi] = int32(i)
		g.hi++
	}
}

// sendGroup sends the packets batch[order[...]] of one socket, fd, tallying
// into n; it returns an error only when the link is unusable. It clears
// *gso when the kernel refuses a run, so that the batch's later sockets go
// without GSO too.
func (l *Link) sendGroup(fd int, batch []dataplane.TxPacket, order []int32, gso *bool, n *txTally) error {
	t := &l.tx
	from := 0
build:
	for {
		k := t.build(batch, order[from:], *gso)
		for i := 0; i < k; {
			got, e := sendmmsg(fd, t.vec[i:k])
			n.calls++
			if e == 0 {
				for _, en := range t.ent[i : i+got] {
					n.sent += en.count
					if en.count > 1 {
						n.runs++
					}
				}
				i += got
				continue
			}
			if e == unix.EINTR {
				continue
			}
			if e == unix.EAGAIN || fatal(e) {
				// Nothing more will go out of this socket in this batch.
				rest := 0
				for _, en := range t.ent[i:k] {
					rest += en.count
				}
				if e == unix.EAGAIN {
					n.full += rest
					return nil
				}
				n.failed += rest
				return fmt.Errorf("udplink: sendmmsg on the socket of source port %d: %w", l.portOf(fd), e)
			}
			if t.ent[i].count > 1 {
				if e == unix.EIO {
					l.gsoOff(e)
				}
				*gso, from = false, from+t.ent[i].first
				continue build
			}
			n.failed++
			i++
		}
		return nil
	}
}

// portOf is the source port socket fd sends from (cold path: errors).
func (l *Link) portOf(fd int) int {
	if fd == l.fd {
		return int(l.cfg.Port)
	}
	for i, f := range l.src.fds {
		if f == fd {
			return int(l.src.lo) + i
		}
	}
	return -1
}

// build lays out the packets batch[order[...]] as sendmmsg entries,
// coalescing GSO runs when gso is set, and returns how many entries.
func (t *txState) build(batch []dataplane.TxPacket, order []int32, gso bool) int {
	k, iov := 0, 0
	var e *txEntry
	for oi, i := range order {
		p := &batch[i]
		s := uint32(p.Handle)
		sl := &t.slots[s]
		t.iov[iov] = unix.Iovec{Base: &sl.buf[0]}
		t.iov[iov].SetLen(p.Len)
		iov++
		if gso && e != nil && e.open && e.count < maxGSOSegments && p.Len <= e.seg &&
			e.bytes+p.Len <= t.maxGSO && p.Dst == e.dst && p.Control == e.control {
			e.count++
			e.bytes += p.Len
			e.open = p.Len == e.seg
			continue
		}
		e = &t.ent[k]
		*e = txEntry{first: oi, count: 1, slot: s, iov: iov - 1, seg: p.Len, bytes: p.Len,
			open: true, dst: p.Dst, control: p.Control}
		k++
	}
	for j := range k {
		e := &t.ent[j]
		h := &t.vec[j].Hdr
		h.Name = ptr(&t.slots[e.slot].name)
		h.Namelen = t.nameLen
		h.Iov = &t.iov[e.iov]
		h.SetIovlen(e.count)
		ctl := t.ctl[j]
		h.Control = &ctl[0]
		*(*int32)(ptrAt(ctl, cmsgHdrLen)) = t.tos[boolIdx(e.control)]
		if e.count > 1 {
			*(*uint16)(ptrAt(ctl, cmsgInt+cmsgHdrLen)) = uint16(e.seg)
			h.SetControllen(cmsgInt + cmsgU16)
		} else {
			h.SetControllen(cmsgInt)
		}
	}
	return k
}

// gsoOff turns GSO off for good after the kernel refused it with e, and
// says so in Info().Why (cold path: once per link).
func (l *Link) gsoOff(e unix.Errno) {
	l.gso.Store(false)
	in := *l.info.Load()
	in.Why += "; GSO turned off: UDP_SEGMENT send failed: " + e.Error()
	l.info.Store(&in)
}

func boolIdx(b bool) int {
	if b {
		return 1
	}
	return 0
}
