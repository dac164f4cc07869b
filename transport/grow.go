package transport

// Tables that grow with use. A connection end's windows allow 256
// outstanding messages, 512 READ response jobs, 512 packets in flight, 256
// posted receive buffers and 1,024 receiver path ids (the defaults): 177 KB
// if allocated whole, 110 KB of it in records holding pointers, which the
// garbage collector scans on every cycle. Most connections of a large job
// carry a few messages at a time, and 10,000 idle connections held 1.2 GB
// in a daemon, whose collector then spent seconds of CPU marking it while
// connections were being made, on the engines' cores. So each of those
// tables starts small and doubles, up to its window, when a new entry
// would collide with a live one.
//
// Growth keeps what the protocol sees unchanged. A table indexed by an id
// modulo its size (messages by MsgID, packets by PSN, receive buffers by
// RecvSeq) grows whenever the new entry's slot holds a live entry that a
// table of the full window would keep in another slot, that is whenever
// the two ids differ below the window's bits; at the full size it behaves
// exactly as before (ErrQueueFull, OUT_OF_WINDOW, tombstones). Rehoming
// moves each live entry to its id modulo the new size: entries that were
// in distinct slots keep distinct slots, since the new mask only adds bits.
// Tables indexed by a plain slot number (read jobs, receiver paths) just
// get longer. A table never shrinks while its connection lives; a released
// connection's tables, grown or not, go to the endpoint's spares.
//
// Growth allocates, once per doubling, at most a handful of times in a
// connection's life; the hot path's allocation tests run in steady state.

// Initial sizes: enough for a connection that carries a few messages at a
// time and sprays over the default 16 paths.
const (
	initMsgs  = 8
	initJobs  = 4
	initPkts  = 64
	initRecvs = 8
	initPaths = 32
)

// startLen is the length a table starts at: init, or more when a recycled
// store already has the capacity (a power of two no larger than full).
func startLen(init, full, have int) int {
	n := min(init, full)
	for n < full && 2*n <= have {
		n *= 2
	}
	return n
}

// growMsgs doubles the sender's message table and rehomes its live
// messages, and every reference to a message slot: stream lists, the
// segmentation queue and the records of packets in flight.
func (s *sender) growMsgs() {
	old := s.msgs
	n := min(2*len(old), s.msgCap)
	nw := make([]sendMsg, n)
	mask := uint32(n - 1)
	slot := func(o int32) int32 {
		if o < 0 {
			return o
		}
		return int32(old[o].id & mask)
	}
	for i := range old {
		if old[i].inUse {
			nw[old[i].id&mask] = old[i]
		}
	}
	for i := range nw {
		if nw[i].inUse {
			nw[i].next = slot(nw[i].next)
		}
	}
	for i := range s.streams {
		st := &s.streams[i]
		st.head, st.tail = slot(st.head), slot(st.tail)
	}
	for k := s.segQ.head; k != s.segQ.tail; k++ {
		if v := &s.segQ.buf[k&s.segQ.mask]; *v&readJobBit == 0 {
			*v = uint32(slot(int32(*v)))
		}
	}
	for psn := s.una; psn != s.nextPSN; psn++ {
		r := &s.pkts[uint32(psn)&s.pktMask]
		if r.state != psFree && r.msg&readJobBit == 0 && old[r.msg].inUse {
			r.msg = uint32(slot(int32(r.msg)))
		}
	}
	s.msgs, s.msgMask = nw, mask
}

// msgSlot returns the slot for message id, growing the table while the
// slot holds a live message that the full window would keep elsewhere.
func (s *sender) msgSlot(id uint32) *sendMsg {
	m := &s.msgs[id&s.msgMask]
	for m.inUse && (m.id^id)&uint32(s.msgCap-1) != 0 && len(s.msgs) < s.msgCap {
		s.growMsgs()
		m = &s.msgs[id&s.msgMask]
	}
	return m
}

// growJobs lengthens the job table and puts the new jobs on the free
// list; jobs are named by slot number, which stays valid.
func (s *sender) growJobs() bool {
	n := min(2*len(s.jobs), s.jobCap)
	if n <= len(s.jobs) {
		return false
	}
	old := len(s.jobs)
	s.jobs = append(s.jobs, make([]readJob, n-old)...)
	for i := n - 1; i >= old; i-- {
		s.jobs[i].nextFree = s.jobFree
		s.jobFree = int32(i)
	}
	return true
}

// growPkts doubles the packet records, rehoming the PSNs in flight.
func (s *sender) growPkts() {
	n := 2 * len(s.pkts)
	nw := make([]pktRec, n)
	mask := uint32(n - 1)
	for psn := s.una; psn != s.nextPSN; psn++ {
		nw[uint32(psn)&mask] = s.pkts[uint32(psn)&s.pktMask]
	}
	s.pkts, s.pktMask = nw, mask
}

// growMsgs doubles the receiver's message table, rehoming live messages
// and tombstones (recvMsg.delivered) alike.
func (r *receiver) growMsgs() {
	n := min(2*len(r.msgs), r.msgCap)
	nw := make([]recvMsg, n)
	mask := uint32(n - 1)
	for i := range r.msgs {
		if x := &r.msgs[i]; x.inUse {
			nw[x.id&mask] = *x
		}
	}
	r.msgs, r.msgMask = nw, mask
}

// msgSlot returns the slot for message id, growing the table while the
// slot holds a message that the full window would keep elsewhere.
func (r *receiver) msgSlot(id uint32) *recvMsg {
	m := &r.msgs[id&r.msgMask]
	for m.inUse && (m.id^id)&uint32(r.msgCap-1) != 0 && len(r.msgs) < r.msgCap {
		r.growMsgs()
		m = &r.msgs[id&r.msgMask]
	}
	return m
}

// growRecvs doubles the receive queue, rehoming the posted buffers.
func (r *receiver) growRecvs() {
	n := min(2*len(r.recvs), r.recvCap)
	nw := make([]recvBuf, n)
	mask := uint32(n - 1)
	for i := range r.recvs {
		if b := &r.recvs[i]; b.posted {
			nw[b.seq&mask] = *b
		}
	}
	r.recvs, r.recvMask = nw, mask
}

// growPaths makes room for path id pid (below pathCap).
func (r *receiver) growPaths(pid int) {
	n := len(r.paths)
	for n <= pid {
		n *= 2
	}
	r.paths = append(r.paths, make([]*rcvPath, min(n, r.pathCap)-len(r.paths))...)
}
