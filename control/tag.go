package control

import "github.com/metaroce/metaroce/control/proto"

// Work request tags. The application's wr_id is its own (any 64 bits,
// repeated at will), so the transport is handed instead the index of the
// request's entry in its queue pair's tag table, and the completion's
// WRID finds the entry again: the application's wr_id and what it asked
// (an unsignaled request completes only on failure). The table has one
// entry per completion-queue slot, which bounds the requests outstanding
// (budget), so taking an entry never fails and nothing allocates.

type wrTag struct {
	wrid       uint64
	unsignaled bool
	// inline holds an inline request's data while the transport may
	// still read it (until its completion: retransmissions).
	inline [proto.MaxInline]byte
	// sgl is 1 + the index in the queue pair's sgls of the request's
	// gather list, which the transport reads until its completion; 0:
	// none.
	sgl uint16
}

func (q *qp) initTags(n int) {
	q.tags = make([]wrTag, n)
	q.free = make([]uint32, n)
	for i := range q.free {
		q.free[i] = uint32(n - 1 - i)
	}
	q.sgls, q.sglFree = nil, nil // made by the first gather list (takeSGL)
}

// takeSGL takes a gather list from the pool and fills it with segs; ok
// false when the pool is empty.
//
// The pool is made when a queue pair posts its first list, not with the
// queue pair: 64 lists of pointers are 6 KiB the garbage collector scans
// per queue pair, and demo -topology conns took 4.7-5.4 s to create its
// 10,000 queue pairs, none of which ever used a list, instead of 4.0-4.4.
// One allocation per queue pair's life, on the engine.
func (q *qp) takeSGL(segs *[proto.MaxSGE][]byte) (uint16, bool) {
	if q.sgls == nil {
		m := min(len(q.tags), sglSlots)
		q.sgls = make([][proto.MaxSGE][]byte, m)
		q.sglFree = make([]uint16, m)
		for i := range q.sglFree {
			q.sglFree[i] = uint16(m - 1 - i)
		}
	}
	if len(q.sglFree) == 0 {
		return 0, false
	}
	i := q.sglFree[len(q.sglFree)-1]
	q.sglFree = q.sglFree[:len(q.sglFree)-1]
	q.sgls[i] = *segs
	return i + 1, true
}

// putSGL gives a gather list (tag's sgl) back to the pool.
func (q *qp) putSGL(ref uint16) {
	if ref == 0 {
		return
	}
	q.sgls[ref-1] = [proto.MaxSGE][]byte{}
	q.sglFree = append(q.sglFree, ref-1)
}

// tag takes an entry for a request handed to the transport.
func (q *qp) tag(wrid uint64, unsignaled bool) (uint64, bool) {
	if len(q.free) == 0 {
		return 0, false // cannot happen while outstanding <= the CQ's slots
	}
	i := q.free[len(q.free)-1]
	q.free = q.free[:len(q.free)-1]
	q.tags[i] = wrTag{wrid: wrid, unsignaled: unsignaled}
	return uint64(i), true
}

// untag gives back the entry a transport request was not taken with.
func (q *qp) untag(t uint64) {
	q.putSGL(q.tags[t].sgl)
	q.tags[t] = wrTag{}
	q.free = append(q.free, uint32(t))
}

// settle returns the entry of a completed request and frees it; ok is
// false for a WRID that is no entry in use (a bug, or a completion that
// is not a request's).
func (q *qp) settle(t uint64) (wrTag, bool) {
	if t >= uint64(len(q.tags)) || len(q.free) == len(q.tags) {
		return wrTag{}, false
	}
	w := q.tags[t]
	q.putSGL(w.sgl)
	q.tags[t] = wrTag{}
	q.free = append(q.free, uint32(t))
	return w, true
}
