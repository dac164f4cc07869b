// Package ring is metaroce's shared-memory transport between applications
// and the daemon: lock-free single-producer single-consumer rings of
// fixed-size slots in a memfd that both processes map, and doorbells (a
// pair of datagram sockets, one end per process) that wake a sleeping
// consumer only when it asked to be woken. A queue pair
// is a few of these (send queue, completion queue); the daemon's engines use
// them as mailboxes too.
//
// # Layout
//
// A ring is one memfd, made by Create (memfd_create, ftruncate, sealed with
// F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL, mmap MAP_SHARED) and mapped by the
// peer with Attach. It holds a 256-byte header and then the slots:
//
//	  0  magic "MRRG", version 1, slot size, slot count   written once by Create
//	 64  producer index                                   its own cache line
//	128  consumer index                                   its own cache line
//	192  need-wakeup flag                                 its own cache line
//	256  slot array: count x size bytes
//
// The slot count is a power of two; the indices are free-running uint32s,
// slot i lives at (i & (count-1)) * size, and every difference of indices is
// taken in wrapping uint32 arithmetic, so they pass through 2^32 unharmed
// (tested from start values just below it). Shared memory holds only
// numbers: indices, sizes, and whatever records the user puts in slots
// (offsets, never Go pointers, which would mean nothing in the other
// process and would hide memory from the garbage collector).
//
// # Views and batches
//
// A process works on a ring through one view: Producer (Reserve, Slot,
// Commit) or Consumer (Peek, Slot, Release). Each view owns its own index
// outright: it reads its shared word once, when made, and afterwards only
// stores it. It keeps a cached copy of the other side's index, and loads the
// shared one only when the cache shows fewer slots than it was asked for.
// So a batch of any size costs at most one atomic load and one atomic store:
//
//	first, got, err := p.Reserve(32)          // maybe one load of the consumer index
//	for i := range got { fill(p.Slot(first + i)) }
//	p.Commit(got)                             // one store of the producer index
//	p.Notify(bell)                            // one load of the flag, a syscall only if asleep
//
//	first, got, err := c.Peek(32)             // maybe one load of the producer index
//	for i := range got { use(c.Slot(first + i)) }
//	c.Release(got)                            // one store of the consumer index
//
// Commit(n) and Release(n) may take fewer slots than were reserved or
// peeked; the rest are handed out again by the next Reserve or Peek.
//
// # Memory ordering
//
// The producer writes slots with plain stores, then stores the producer
// index; the consumer loads the producer index, reads the slots with plain
// loads, then stores the consumer index; the producer loads that before
// reusing the slots. Index words are read with atomic.LoadUint32 and written
// with atomic.StoreUint32 on the mapped memory. Go's atomics are
// sequentially consistent, which includes what the ring needs: load-acquire
// (no slot access moves before the index load) and store-release (no slot
// access moves after the index store). The Go memory model speaks of one
// program; across processes what holds is what the compiler emits for those
// calls, the same instructions on the same physical memory: XCHG for the
// store and a plain MOV for the load on amd64 (TSO), STLR and LDAR on arm64.
//
// The in-process tests also run the protocol over a ring in Go heap memory,
// where the race detector sees the slot accesses and the atomics' edges, so
// a missing or misplaced barrier would be reported there.
//
// # Waking a sleeping consumer
//
// Busy-polling is the fast path; a consumer with nothing to do for a while
// sleeps instead (a 2-core host runs a daemon and its applications). The
// protocol is AF_XDP's need_wakeup, with a doorbell whose other end is
// passed next to the memfd:
//
//	consumer (Consumer.Wait)             producer (Commit, then Notify)
//	(1) store flag = 1                   (3) store producer index
//	(2) load producer index              (4) load flag
//	    not empty: clear flag, go on         set: swap it to 0, ring the bell
//	    empty: poll the bell                 clear: nothing, no syscall
//	    woken: clear flag, check again
//
// Both sides store, then load the other's word, with sequentially
// consistent atomics (the store on amd64 is an XCHG, a full barrier; on
// arm64 an LDAR is never reordered before an earlier STLR). In the single
// order of those four operations, (1) or (3) comes first; so either (2)
// sees the published slot and the consumer does not sleep, or (4) sees the
// flag and the producer rings. The wakeup cannot be lost in between. A
// consumer that keeps up never sets the flag, and Notify then costs one
// load. Rings coalesce in the bell's queue (a wait takes them all), and the
// swap means one ring per sleep however many commits arrive. A leftover
// ring only makes the next sleep return at once and look again. Waits take
// a timeout or a context, which is one eventfd per Doorbell, private to the
// process, that context.AfterFunc rings.
//
// # Doorbells
//
// A doorbell is socketpair(AF_UNIX, SOCK_DGRAM): the daemon keeps one end
// and passes the other, and ringing is sending a one-byte datagram to the
// other end. It is chosen over an eventfd, which both processes would
// share as one file description, because the description's flags are
// shared too: a peer that clears O_NONBLOCK on a shared eventfd makes the
// other side's read block when the count is zero, and its write block
// when the count is full (an eventfd write blocks at the maximum count),
// for good. Two socket ends are two descriptions; Ring sends with
// MSG_DONTWAIT|MSG_NOSIGNAL, which cannot block or raise SIGPIPE whatever
// either end's flags say (a full queue, EAGAIN, means a ring is already
// waiting), and the receiving end reads only with MSG_DONTWAIT, and only
// its own process holds it. A futex in the ring's memory would serve a
// consumer that sleeps on one ring, but the engine sleeps on its link's
// descriptor and every send queue at once, which a descriptor in an
// epoll set does and a futex cannot.
//
// # A hostile peer
//
// The daemon shares rings with applications it does not trust, and an
// application should not have to trust the daemon's memory either. The
// peer can write any byte of the mapping at any time. Here is what that can
// and cannot do.
//
// It cannot make us fault or read outside the mapping. Attach takes the
// mapping size from fstat, requires a memfd sealed against shrinking (so it
// cannot be truncated under us, which would raise SIGBUS), and validates the
// header against the limits and the file size once; that copy is the only
// one ever read again, so rewriting the header later does nothing. Every
// slot offset is masked with our own copy of the count. Every value loaded
// from the peer's index word is checked before use: a consumer refuses a
// producer index more than one ring ahead of what it released or behind
// what it already peeked; a producer refuses a consumer index ahead of what
// it published or too far behind. Such an index makes the view fail with
// ErrCorrupt, for good. A bad header is an error wrapping ErrBadHeader.
//
// It can feed us garbage: any slot contents, and any index movement inside
// the legal window (which looks like valid records of its choosing, or
// records withdrawn). Slot contents can even change while we read them, so
// a consumer must copy a record out, then validate the copy, and treat every
// offset or length in it as untrusted input. It can stop making progress,
// leaving a ring full or empty for ever; it can ring our doorbell for
// nothing (a wakeup is a hint: we look and sleep again), or clear the flag
// so that our producer does not ring us, which only delays us until our
// wait's timeout. So owners wait with deadlines and drop peers that stall.
// It can overwrite our own index words, but we never read those after
// making the view.
package ring
