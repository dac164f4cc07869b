package dataplane

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"

	"github.com/metaroce/metaroce/wire"
)

// Handing packets between engines.
//
// RSS spreads a host's incoming packets over NIC queues by hashing the
// 5-tuple, and the UDP source port is the path entropy, so one
// connection's packets arrive on every queue; but a connection belongs to
// one engine, and only that engine may touch it. An XDP program cannot
// send a packet to the AF_XDP socket of another queue (the kernel drops a
// redirect to a socket bound to a queue other than the packet's), so the
// engines hand packets over themselves: every connection id carries its
// owner's engine index in its low bits (transport.Config.IDMask/IDTag), an
// engine that receives a packet for another engine's connection copies it
// into that engine's Mailbox, and each engine drains its mailboxes every
// loop iteration. Connection set-up packets with no destination id yet
// (CONNECT) are served by whichever engine receives them; the connection
// then belongs to that engine.
//
// A Mailbox is a single-producer, single-consumer ring: fixed slots
// allocated once, producer and consumer indices on their own cache lines,
// each side caching the other's index and touching the shared atomics once
// per batch (the AF_XDP ring pattern). A full mailbox drops the packet and
// counts it; the transport recovers it like any loss. The copy costs a
// memmove of the packet (measured by BenchmarkMailbox).

// Mailbox carries packets from one engine to another.
type Mailbox struct {
	_    [64]byte
	head atomic.Uint32 // next slot the consumer reads; written by the consumer
	_    [60]byte
	tail atomic.Uint32 // next slot the producer writes; written by the producer
	_    [60]byte

	// Producer side (one goroutine).
	ptail, pheadCache uint32
	_                 [56]byte
	// Consumer side (one goroutine).
	chead, ctailCache uint32
	_                 [56]byte

	slots []mailSlot
	mask  uint32
	// Drops counts packets that found the mailbox full.
	Drops atomic.Uint64
}

type mailSlot struct {
	from netip.Addr
	port uint16
	ce   bool
	n    int
	buf  []byte
	// arrival is the packet's RxPacket.Arrival (CLOCK_MONOTONIC ns, 0
	// unknown): a forwarded packet keeps its link's stamp, so its
	// owner's AckDelay and RTT samples leave the hand-off out too.
	arrival int64
	plane   uint8 // RxPacket.Plane
}

// NewMailbox returns a mailbox of size slots (a power of two) of slotSize
// bytes each.
func NewMailbox(size, slotSize int) *Mailbox {
	m := &Mailbox{slots: make([]mailSlot, size), mask: uint32(size - 1)}
	for i := range m.slots {
		m.slots[i].buf = make([]byte, slotSize)
	}
	return m
}

// put copies p into the next slot; false when full or too large. The
// packet is visible to the consumer only after publish.
func (m *Mailbox) put(p *RxPacket) bool {
	if m.ptail-m.pheadCache == uint32(len(m.slots)) {
		m.pheadCache = m.head.Load()
		if m.ptail-m.pheadCache == uint32(len(m.slots)) {
			m.Drops.Add(1)
			return false
		}
	}
	s := &m.slots[m.ptail&m.mask]
	if len(p.Payload) > len(s.buf) {
		m.Drops.Add(1)
		return false
	}
	s.n = copy(s.buf, p.Payload)
	s.from, s.port, s.ce, s.arrival, s.plane = p.From, p.SrcPort, p.CE, p.Arrival, p.Plane
	m.ptail++
	return true
}

// publish makes the slots put so far visible (one release store).
func (m *Mailbox) publish() {
	if m.tail.Load() != m.ptail {
		m.tail.Store(m.ptail)
	}
}

// drain hands every published packet to f and frees the slots.
func (m *Mailbox) drain(f func(s *mailSlot)) int {
	if m.chead == m.ctailCache {
		m.ctailCache = m.tail.Load()
		if m.chead == m.ctailCache {
			return 0
		}
	}
	n := 0
	for m.chead != m.ctailCache {
		f(&m.slots[m.chead&m.mask])
		m.chead++
		n++
	}
	m.head.Store(m.chead)
	return n
}

// owner returns the engine a packet belongs to: the tag in its
// destination connection id; for a CONNECT, which has none yet, the tag
// in the service it asks for (the daemon numbers each application queue
// pair, a service, with its engine's tag, so the connection is made on
// the engine that serves the queue pair, whichever queue RSS picked);
// -1 for "whoever received it" (other set-up packets, or something that
// does not parse as a v1 packet: the local transport counts and drops
// it).
func owner(pkt []byte, mask uint32) int {
	if mask == 0 || len(pkt) < wire.PrefixLen || pkt[0] != wire.Version {
		return -1
	}
	id := binary.BigEndian.Uint32(pkt[4:8])
	if id == 0 {
		if wire.Opcode(pkt[1]) == wire.OpConnect && len(pkt) >= connectServiceEnd {
			return int(binary.BigEndian.Uint32(pkt[connectServiceEnd-4:connectServiceEnd]) & mask)
		}
		return -1
	}
	return int(id & mask)
}

// connectServiceEnd is where a CONNECT's Service field ends (§7.2:
// bytes 16..19).
const connectServiceEnd = 20

// ConnectEngines lets engines serving queues of one interface hand each
// other the packets of connections they do not own. Engine i must have
// been built with an endpoint whose IDMask covers len(engines) and IDTag i.
func ConnectEngines(engines []*Engine, slots int) {
	mask := IDMask(len(engines))
	for i, e := range engines {
		e.index = i
		e.idMask = mask
		e.out = make([]*Mailbox, len(engines))
		// A forwarded packet may wait for an idle owner: bound the sleep
		// so it waits at most this long (no cross-thread wakeup yet).
		e.cfg.MaxSleep = min(e.cfg.MaxSleep, mailboxMaxSleep)
	}
	size := nextPow2(max(slots, 64))
	for i, src := range engines {
		for j, dst := range engines {
			if i == j {
				continue
			}
			m := NewMailbox(size, src.ep.MaxPacket())
			src.out[j] = m
			dst.in = append(dst.in, m)
		}
	}
}

// IDMask is the transport.Config.IDMask that engines of n queues use: the
// low bits of a connection id that hold its owner's engine index.
func IDMask(n int) uint32 { return uint32(nextPow2(n) - 1) }

func nextPow2(v int) int {
	n := 1
	for n < v {
		n <<= 1
	}
	return n
}
