package udplink

import (
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/dataplane"
)

// Receive side. Buffers are slots of one backing array: 2*Batch of them, so
// that the engine can hold a whole batch while the next one is read. A slot
// is free or held:
//
//	free ──(Receive puts it in the recvmmsg vector)──> held
//	held: refs = 1 while datagrams of it wait to be handed out (the
//	      "pending" hold), plus 1 per RxPacket handed out from it
//	held ──(refs drops to 0: last packet released, or the datagram was
//	       dropped)──> free
//
// Receive only ever gives the kernel free slots, so a buffer the engine
// holds is never written. Without GRO a slot carries one packet; with GRO it
// may carry several (one per segment of a coalesced datagram), all released
// separately. A slot's generation changes each time it goes to the kernel,
// and the packet's Handle carries it, so releasing a foreign handle, or a
// packet whose slot is already free or reused, panics instead of handing the
// kernel a buffer the engine still reads. (Releasing one segment of a GRO
// slot twice while its siblings are held cannot be told from releasing the
// siblings; Release each packet exactly once.)

// rxBuffers is how many receive slots a link has per batch.
const rxBuffers = 2

type rxState struct {
	v4       bool
	slotSize int
	slots    []rxSlot
	free     []uint32 // stack of free slot indexes

	// The recvmmsg vector, built once: entry i always points at names[i],
	// ctl[i] and iov[i]; Receive only points iov[i] at a free slot.
	vec   []unix.Mmsghdr
	iov   []unix.Iovec
	names []sockaddr
	ctl   [][]byte
	inVec []uint32 // slot of each vector entry in the current call

	// Datagrams of the last recvmmsg not yet fully handed out: res[head:tail],
	// of which the first has had off bytes delivered already.
	res              []rxResult
	head, tail, off  int
	nameLen, ctlLen  uint32
	truncated, split int // per-call counts, added to the counters once
}

type rxSlot struct {
	buf  []byte
	gen  uint32
	refs int32
}

// rxResult is one received datagram, parsed out of its vector entry.
type rxResult struct {
	slot uint32
	n    int // bytes
	seg  int // UDP_GRO segment size, or 0
	from netip.Addr
	port uint16 // source port, host order
	tos  uint8
}

func (r *rxState) init(batch, slotSize int, v4 bool) {
	n := rxBuffers * batch
	r.v4, r.slotSize = v4, slotSize
	r.slots = make([]rxSlot, n)
	r.free = make([]uint32, 0, n)
	mem := make([]byte, n*slotSize)
	for i := range r.slots {
		// A fresh slot has generation 1, so that a zero Handle is never valid.
		r.slots[i] = rxSlot{buf: mem[i*slotSize : (i+1)*slotSize : (i+1)*slotSize], gen: 1}
		r.free = append(r.free, uint32(n-1-i))
	}
	r.vec = make([]unix.Mmsghdr, batch)
	r.iov = make([]unix.Iovec, batch)
	r.names = make([]sockaddr, batch)
	r.ctl = ctlBufs(batch, rxCtlLen)
	r.inVec = make([]uint32, batch)
	r.res = make([]rxResult, batch)
	r.nameLen = unix.SizeofSockaddrInet6
	if v4 {
		r.nameLen = unix.SizeofSockaddrInet4
	}
	r.ctlLen = rxCtlLen
	for i := range r.vec {
		h := &r.vec[i].Hdr
		h.Name = ptr(&r.names[i])
		h.Iov = &r.iov[i]
		h.SetIovlen(1)
		h.Control = &r.ctl[i][0]
	}
}

// pending reports whether datagrams of an earlier recvmmsg wait to be
// handed out.
func (r *rxState) pending() bool { return r.head < r.tail }

// unhold drops a reference to slot s, freeing it at zero.
func (r *rxState) unhold(s uint32) {
	sl := &r.slots[s]
	sl.refs--
	if sl.refs == 0 {
		r.free = append(r.free, s)
	}
}

func rxHandle(s uint32, gen uint32) uint64 { return uint64(gen)<<32 | uint64(s) }

// Receive fills batch with up to len(batch) packets and returns how many.
// It first hands out what is left of the previous recvmmsg (the segments of
// a GRO datagram that did not fit), then, if batch has room and slots are
// free, makes one recvmmsg for min(room, free slots, Batch) datagrams. It
// returns 0 when nothing is queued (EAGAIN). Payloads point into the link's
// slots and stay valid until Release.
func (l *Link) Receive(batch []dataplane.RxPacket) int {
	r := &l.rx
	n := l.deliver(batch)
	if n == len(batch) || l.closed {
		return n
	}
	vlen := min(len(batch)-n, len(r.free), len(r.vec))
	if vlen == 0 {
		return n
	}
	top := len(r.free)
	for i := range vlen {
		s := r.free[top-1-i]
		sl := &r.slots[s]
		if sl.gen++; sl.gen == 0 {
			sl.gen = 1 // a zero Handle is never valid
		}
		sl.refs = 1
		r.inVec[i] = s
		r.iov[i].Base = &sl.buf[0]
		r.iov[i].SetLen(r.slotSize)
		h := &r.vec[i].Hdr
		h.Namelen = r.nameLen
		h.SetControllen(int(r.ctlLen))
		h.Flags = 0
	}
	r.free = r.free[:top-vlen]

	got, e := recvmmsg(l.fd, r.vec[:vlen])
	l.counters.recvCalls.Add(1)
	if e != 0 {
		got = 0
		if e != unix.EAGAIN && e != unix.EINTR {
			l.counters.recvErrors.Add(1)
		}
	}
	// Slots the kernel did not fill go back as they were.
	for i := vlen - 1; i >= got; i-- {
		r.unhold(r.inVec[i])
	}
	l.parse(got)
	n += l.deliver(batch[n:])
	add(&l.counters.truncated, r.truncated)
	add(&l.counters.recvGRO, r.split)
	r.truncated, r.split = 0, 0
	return n
}

// parse turns the first got vector entries into res, dropping (and
// counting) the datagrams that do not fit MaxPayload.
func (l *Link) parse(got int) {
	r := &l.rx
	r.head, r.tail, r.off = 0, 0, 0
	for i := range got {
		m := &r.vec[i]
		s := r.inVec[i]
		if m.Hdr.Flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
			// Longer than the slot (MSG_TRUNC), or control messages lost
			// (MSG_CTRUNC: a GRO datagram would be taken for one packet).
			r.truncated++
			r.unhold(s)
			continue
		}
		meta := parseCmsgs(r.ctl[i][:min(int(m.Hdr.Controllen), rxCtlLen)])
		size := int(m.Len)
		if meta.seg >= size {
			meta.seg = 0
		}
		pkt := size
		if meta.seg > 0 {
			pkt = meta.seg
		}
		if pkt > l.cfg.MaxPayload {
			// Fits a 64 KiB GRO slot but not the packet size the link
			// promises: the same drop as MSG_TRUNC without GRO.
			if meta.seg > 0 {
				r.truncated += (size + meta.seg - 1) / meta.seg
			} else {
				r.truncated++
			}
			r.unhold(s)
			continue
		}
		if meta.seg > 0 {
			r.split++
		}
		r.res[r.tail] = rxResult{slot: s, n: size, seg: meta.seg, from: addrOf(&r.names[i], r.v4),
			port: portOf(&r.names[i]), tos: meta.tos}
		r.tail++
	}
}

// deliver hands out parsed datagrams, a GRO datagram as one packet per
// segment, until batch is full or nothing is left.
func (l *Link) deliver(batch []dataplane.RxPacket) int {
	r := &l.rx
	k := 0
	for r.head < r.tail && k < len(batch) {
		res := &r.res[r.head]
		sl := &r.slots[res.slot]
		take := res.n - r.off
		if res.seg > 0 {
			take = min(take, res.seg)
		}
		batch[k] = dataplane.RxPacket{
			Payload: sl.buf[r.off : r.off+take : r.off+take],
			From:    res.from,
			CE:      res.tos&ecnMask == ecnCE,
			SrcPort: res.port,
			Handle:  rxHandle(res.slot, sl.gen),
		}
		sl.refs++
		k++
		r.off += take
		if r.off >= res.n {
			// The datagram is all handed out: drop its pending hold.
			r.head++
			r.off = 0
			r.unhold(res.slot)
		}
	}
	add(&l.counters.received, k)
	return k
}

// Release gives received packets' buffers back: no syscall, only the slot
// bookkeeping above. Each packet must be released exactly once; a handle
// that is not a held packet of this link panics.
func (l *Link) Release(batch []dataplane.RxPacket) {
	r := &l.rx
	for i := range batch {
		h := batch[i].Handle
		s, gen := uint32(h), uint32(h>>32)
		if int(s) >= len(r.slots) || r.slots[s].gen != gen || r.slots[s].refs <= 0 {
			panic("udplink: Release of a packet this link does not hold (released twice, or a foreign handle)")
		}
		r.unhold(s)
	}
}

// ECN codepoints (RFC 3168), the low two bits of the TOS or traffic class.
const (
	ecnMask = 0x03
	ecnECT0 = 0x02
	ecnCE   = 0x03
)
