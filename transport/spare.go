package transport

import "unsafe"

// Recycling window storage. A connection end holds kilobytes of windows
// (its packet, message, job and path rings: 23 KB in the fabric
// configuration, 43 KB with the defaults as a connection uses them, grow.go,
// docs/scale.md), and an AI job
// that connects lazily opens and closes connections by the thousand: a
// 1024-host all-to-all makes two million connection ends. Allocating each
// one's windows afresh made the garbage collector and page faults a third
// of the simulator's time. So a released connection hands its windows to
// the endpoint, and the next connection takes them, zeroed, instead of
// allocating.
//
// The released Conn keeps what its owner may still read (state, counters,
// its controller) and loses its windows and paths (a closed connection
// has no paths: Paths appends none, PathCounts is 0, 0). Its slices are
// set to nil, so code that touched a released connection's windows would
// fail loudly rather than write into another connection's. Reused memory
// is also warm: the first writes to a fresh 3 KB path array were most of
// a connection's set-up.

// sendStore is a sender's recyclable storage.
type sendStore struct {
	pkts    []pktRec
	msgs    []sendMsg
	streams []streamQ
	jobs    []readJob
	segQ    []uint32
	retxQ   []uint32
	rings   []txRec
	paths   []sendPath
	active  []uint16
	owed    []uint16
}

// recvStore is a receiver's recyclable storage.
type recvStore struct {
	bits    []uint64
	msgs    []recvMsg
	streams []recvStream
	recvs   []recvBuf
	paths   []*rcvPath
	ackQ    []uint16
	nacks   []nackRec
}

// spareBytes bounds the storage an endpoint keeps for reuse. Enough for
// the fabric configuration's churn (a new connection for each one closed)
// and a burst of closes; it is held after the burst, so it stays small.
const spareBytes = 1 << 20

// spareLimit is how many stores of each kind the endpoint keeps under
// spareBytes for cfg's windows (at least two).
func spareLimit(cfg *Config) int {
	window := nextPow2(cfg.SendWindow)
	per := window*int(unsafe.Sizeof(pktRec{})) +
		cfg.MsgWindow*int(unsafe.Sizeof(sendMsg{})+2*unsafe.Sizeof(readJob{})+unsafe.Sizeof(recvMsg{})) +
		cfg.MaxStreams*int(unsafe.Sizeof(streamQ{})+unsafe.Sizeof(recvStream{})) +
		cfg.Paths*int(unsafe.Sizeof(sendPath{})+4) + cfg.Paths*cfg.PathRing*int(unsafe.Sizeof(txRec{})) +
		cfg.MaxPathID*int(unsafe.Sizeof(rcvPath{})+8) +
		cfg.RecvQueue*int(unsafe.Sizeof(recvBuf{}))
	return max(2, spareBytes/per)
}

// reuse returns s resliced to n zeroed elements when its capacity allows,
// else a new slice.
func reuse[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// take pops the last spare store off *spares, or returns an empty store
// whose nil slices make the caller allocate.
func take[T any](spares *[]T) (st T) {
	if k := len(*spares); k > 0 {
		st = (*spares)[k-1]
		var zero T
		(*spares)[k-1] = zero
		*spares = (*spares)[:k-1]
	}
	return st
}

// recycle takes c's windows (c has been released: no table, heap or
// queue of the endpoint reaches it) and keeps them for the next
// connection while there is room.
func (e *Endpoint) recycle(c *Conn) {
	s, r := &c.snd, &c.rcv
	if s.pkts != nil && len(e.spareSend) < e.spareMax {
		// Drop references to application memory now, not at reuse.
		clear(s.msgs)
		clear(s.jobs)
		e.spareSend = append(e.spareSend, sendStore{pkts: s.pkts, msgs: s.msgs, streams: s.streams,
			jobs: s.jobs, segQ: s.segQ.buf, retxQ: s.retxQ.buf, rings: s.rings,
			paths: s.paths, active: s.active, owed: s.probesOwed})
	}
	s.pkts, s.msgs, s.streams, s.jobs, s.rings = nil, nil, nil, nil, nil
	s.paths, s.active, s.probesOwed = nil, nil, nil
	s.segQ, s.retxQ = ringU32{}, ringU32{}
	if r.bits != nil && len(e.spareRecv) < e.spareMax {
		clear(r.msgs)
		clear(r.recvs)
		e.spareRecv = append(e.spareRecv, recvStore{bits: r.bits, msgs: r.msgs, streams: r.streams,
			recvs: r.recvs, paths: r.paths, ackQ: r.ackQ, nacks: r.nacks})
	}
	r.bits, r.msgs, r.streams, r.recvs, r.paths, r.ackQ, r.nacks = nil, nil, nil, nil, nil, nil, nil
}
