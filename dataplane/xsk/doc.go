// Package xsk is metaroce's AF_XDP socket layer, written directly on
// golang.org/x/sys/unix: a UMEM, its fill and completion rings, the RX and TX
// rings, and batch operations over them that make no allocation, take no
// lock, and make at most one syscall per batch.
//
// # Objects
//
// A Socket is bound to one queue of one interface and owns a UMEM: an
// anonymous mmap of Config.NumFrames frames of Config.FrameSize bytes
// (2048 or 4096), registered with XDP_UMEM_REG. A frame is named by its byte
// offset in the UMEM (its address). Four rings, each mmap'd from the socket at
// the offsets XDP_MMAP_OFFSETS reports, move frame addresses between us and
// the kernel:
//
//	fill ring        we produce  empty frames for the kernel to receive into
//	RX ring          we consume  descriptors (addr, len, options) of received frames
//	TX ring          we produce  descriptors of frames to send
//	completion ring  we consume  addresses of frames the kernel has sent
//
// The FramePool is the free list of frame addresses: preallocated, a stack,
// no allocation per packet. Every frame is always in exactly one place: the
// pool, the fill ring or the kernel's receive path, the RX ring or the
// caller's hands, the TX ring or the kernel's send path, the completion ring.
// Socket.InFlight counts the kernel's share from the ring indices, so
// Pool().Free() + InFlight + what the caller holds == Pool().Cap() is the
// leak check the tests make (TX spans, below, are apart from the pool:
// their descriptors in flight count in InFlight too).
//
// # Ownership
//
// A Socket has a single owner, the engine goroutine: it alone touches the
// rings, the pool and the frames, so nothing needs a lock. Only Stats,
// Counters, Info and FD may be called from elsewhere. A received frame is the
// caller's from Receive until it returns to the pool or the fill ring; a
// frame handed to Transmit is the kernel's until it comes back through
// Complete (copy mode copies it at sendto, but the address only returns on
// the completion ring).
//
// # The ring protocol and memory ordering
//
// Each ring is single-producer single-consumer with free-running uint32
// producer and consumer indices in shared memory; the slot of index i is
// i & (size-1), sizes being powers of two, and the differences
// producer-consumer are computed in wrapping uint32 arithmetic, so the
// indices may wrap through 2^32 (tested). The producer writes slots, then
// stores the producer index; the consumer loads the producer index, reads the
// slots, then stores the consumer index. The kernel side uses
// smp_load_acquire and smp_store_release. Here the indices are read with
// atomic.LoadUint32 and written with atomic.StoreUint32 on the mmap'd words:
// in Go's memory model these are sequentially consistent, which includes
// load-acquire (no slot read moves before the index load) and store-release
// (no slot write, and no slot read, moves after the index store). Slots
// themselves are plain loads and stores.
//
// Each side keeps cached copies of both indices (prodRing, consRing): Reserve
// and Peek work from the cache and load the other side's index only when the
// cache shows fewer entries than asked for; Submit and Release publish a whole
// batch with one store. So a batch costs at most one atomic load and one
// atomic store per ring, whatever its size. Producer and consumer words are
// on separate cache lines (the kernel lays the rings out so).
//
// # need_wakeup
//
// Bound with XDP_USE_NEED_WAKEUP (the default), the kernel sets
// XDP_RING_NEED_WAKEUP in a ring's flags word when it will not look at that
// ring again without a syscall. Transmit publishes the TX batch and then
// reads the TX flag: only if it is set does it call sendto(MSG_DONTWAIT).
// The order matters: the kernel sets the flag and then re-checks the ring,
// and we publish and then read the flag; the sequentially consistent store
// (XCHG on amd64) is the full barrier that keeps one of the two sides from
// missing the other. Refill does the same for RX: after publishing fill
// entries it calls recvfrom(MSG_DONTWAIT) only if the fill ring's flag is
// set. On veth in copy mode the TX flag is always set (every TX batch costs
// one sendto; in copy mode the frames are sent inside that call, up to
// XDP_MAX_TX_SKB_BUDGET of them) and the fill flag never is. Without
// need_wakeup the flags mean nothing (kernel 6.18 sets the TX flag in copy
// mode anyway) and Transmit kicks on every batch.
//
// A kick that returns EAGAIN, EBUSY or ENOBUFS means the kernel took fewer
// frames than were queued (budget reached, no skb, or veth's peer queue full
// and pushing back): the rest stay in the TX ring for the next kick and are
// counted in Counters.TxKickBusy. KickTX kicks when descriptors are still
// pending and the engine has nothing new to send. Wait blocks in ppoll for
// an idle engine; the fd can also go into the engine's own poll set.
//
// # Copy and zero-copy
//
// ModeAuto binds with XDP_ZEROCOPY first and, if the driver refuses
// (EOPNOTSUPP on veth), binds the same socket again with XDP_COPY; Info
// reports the mode the kernel confirms (XDP_OPTIONS) and why zero-copy was
// refused. In copy mode the kernel copies each frame between its skb or
// xdp_buff and the UMEM; the ring protocol is the same. Binding right after
// the queue's previous socket closed fails with EBUSY for 5 to 130 ms, so
// bind retries with a backoff up to Config.BindTimeout.
//
// # Multi-buffer
//
// A UMEM frame is at most a page (4096 bytes; XDP_UMEM_REG refuses 8192),
// and in copy mode the kernel puts its 256-byte headroom in front of every
// received buffer, so one frame holds at most 3840 bytes of packet. A
// 9014-byte Ethernet frame (MTU 9000) does not fit. With Config.SG the
// socket is bound with XDP_USE_SG and such packets travel as chains of
// descriptors, every one but the last carrying PktContd (XDP_PKT_CONTD) in
// Options; the XDP program must be loaded with BPF_F_XDP_HAS_FRAGS for them
// to reach it (and, in native mode, to attach at an MTU above about 3506 at
// all). Measured on veth in copy mode: a 9014-byte frame arrives as three
// descriptors of 3840, 3840 and 1334 bytes.
//
// Receive: the kernel fills one frame from the fill ring per buffer, each
// after its own headroom, so the pieces of a packet are never adjacent in
// the UMEM. Receive passes the descriptors through as they are, and a
// chain may end one batch and continue in the next. An Assembler gathers a
// chain into one contiguous buffer the caller owns (a preallocated
// scratch): Start with the buffer, Add each descriptor's bytes, and on
// AsmDone the packet is whole. Each frame may go back to the fill ring as
// soon as it is copied. A chain longer than the buffer, longer than 18
// descriptors, or begun without a buffer is discarded to its last
// descriptor (AsmDropped), so one bad chain never desynchronises the next.
//
// Transmit: Config.TxSpans reserves, after the pool's frames, runs of
// Config.SpanFrames consecutive frames. The UMEM is one mapping, so a span
// is contiguous memory: the caller takes one (GetSpan), writes the whole
// packet into SpanBuf in one piece as if the frame were large, and Split
// cuts it at frame boundaries into a chain (the kernel requires each
// descriptor to lie inside one frame). Transmit queues a chain whole or not
// at all: when the TX ring has room for part of a batch it stops after the
// last complete packet, so the kernel never sees half a packet. The
// completion ring returns one address per descriptor; the span counts its
// descriptors in flight and goes back to the span list with the last, so
// a span is never rewritten while the kernel may still read it. Nothing in
// this allocates: spans, their counters and the Assembler's buffer are
// sized once.
//
// # Errors and counters
//
// Open wraps every failure with the step that failed. The hot path returns
// an error only for a kick or wake that failed for a reason other than
// "try again" (ENETDOWN, ENXIO); busy kicks, full rings and wakeups are
// counted in Counters (single-writer atomics, read from any goroutine).
// The kernel's own counters come from XDP_STATISTICS via Stats.
//
// The XDP program that steers packets into a socket (by XSKMAP at the
// queue's index) is not part of this package; see bpf/. The tests carry a
// small one of their own, built with cilium/ebpf's asm package.
package xsk
