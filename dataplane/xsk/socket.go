package xsk

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Socket is an AF_XDP socket bound to one queue of one interface, with its
// own UMEM, frame pool and four rings. It has a single owner, the engine
// goroutine: no method is safe for concurrent use except Stats, Counters,
// Info and FD.
type Socket struct {
	// The rings, for callers that drive them directly. Fill and TX are ours
	// to produce into; RX and Completion ours to consume from. A ring left
	// out by Config.NoRX or NoTX has Size 0 and must not be used.
	Fill       FillRing
	Completion CompletionRing
	RX         RxRing
	TX         TxRing

	fd      int
	umem    []byte
	maps    [][]byte // ring mmaps, unmapped by Close
	pool    *FramePool
	spans   spans // TX spans (Config.TxSpans), after the pool's frames
	info    Info
	headOff uint64 // kernelHeadroom + Config.Headroom

	// Hot-path scratch, allocated once so that no call escapes to the heap.
	pollfd  unix.PollFd
	timeout unix.Timespec
	addrs   [batchScratch]uint64

	counters counters
	closed   bool
}

// batchScratch is the chunk in which Complete moves addresses from the
// completion ring to the pool.
const batchScratch = 64

// Info is what Open found out about the kernel and the device. It is fixed
// once Open returns.
type Info struct {
	Ifindex int
	Queue   uint32
	// Config is the configuration with every default filled in.
	Config Config
	// ZeroCopy is true when the kernel reports XDP_OPTIONS_ZEROCOPY.
	ZeroCopy bool
	// ZeroCopyErr is why a zero-copy bind was refused in ModeAuto (veth:
	// EOPNOTSUPP); nil if zero-copy was bound or not tried.
	ZeroCopyErr error
	// NeedWakeup is true when bound with XDP_USE_NEED_WAKEUP.
	NeedWakeup bool
	// SG is true when bound with XDP_USE_SG.
	SG bool
	// TxSkbBudget is the XDP_MAX_TX_SKB_BUDGET in force, 0 if it could not be
	// set (TxSkbBudgetErr says why; ENOPROTOOPT before kernel 6.17).
	TxSkbBudget    uint32
	TxSkbBudgetErr error
	// BusyPollErr lists the busy-poll options the kernel refused (EPERM
	// without CAP_NET_ADMIN, ENOPROTOOPT where unsupported); nil if all
	// were set or BusyPoll was not asked for.
	BusyPollErr error
	// BindAttempts counts bind calls (more than one: EBUSY retries or the
	// copy-mode fallback); BindWait is the time spent waiting for EBUSY.
	BindAttempts int
	BindWait     time.Duration
}

func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ifindex %d queue %d: ", i.Ifindex, i.Queue)
	if i.ZeroCopy {
		b.WriteString("zero-copy")
	} else {
		b.WriteString("copy mode")
		if i.ZeroCopyErr != nil {
			fmt.Fprintf(&b, " (zero-copy refused: %v)", i.ZeroCopyErr)
		}
	}
	fmt.Fprintf(&b, ", need_wakeup %v, sg %v", i.NeedWakeup, i.SG)
	if i.TxSkbBudget != 0 {
		fmt.Fprintf(&b, ", tx budget %d", i.TxSkbBudget)
	} else if i.TxSkbBudgetErr != nil {
		fmt.Fprintf(&b, ", tx budget not set: %v", i.TxSkbBudgetErr)
	}
	if i.Config.BusyPoll != nil {
		if i.BusyPollErr != nil {
			fmt.Fprintf(&b, ", busy poll: %v", i.BusyPollErr)
		} else {
			fmt.Fprintf(&b, ", busy poll %d us x %d", i.Config.BusyPoll.Usecs, i.Config.BusyPoll.Budget)
		}
	}
	if i.Config.TxSpans > 0 {
		fmt.Fprintf(&b, ", %d tx spans of %d frames", i.Config.TxSpans, i.Config.SpanFrames)
	}
	fmt.Fprintf(&b, ", %d frames of %d B, bind attempts %d (waited %v)",
		i.Config.NumFrames, i.Config.FrameSize, i.BindAttempts, i.BindWait.Round(time.Millisecond))
	return b.String()
}

// Open creates an AF_XDP socket, registers a UMEM, creates and maps the rings
// and binds to queue of the interface with index ifindex. Call it on a thread
// in the interface's network namespace (ifindex is per namespace); the socket
// works from any thread afterwards. The frame pool starts full: put frames
// into the fill ring (Refill) before expecting to receive.
func Open(ifindex int, queue uint32, cfg Config) (*Socket, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	s := &Socket{fd: -1, headOff: uint64(kernelHeadroom + cfg.Headroom)}
	s.info = Info{Ifindex: ifindex, Queue: queue, Config: cfg}
	if err := s.open(ifindex, queue, cfg); err != nil {
		s.Close()
		return nil, fmt.Errorf("xsk: ifindex %d queue %d: %w", ifindex, queue, err)
	}
	return s, nil
}

func (s *Socket) open(ifindex int, queue uint32, cfg Config) error {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket(AF_XDP): %w", err)
	}
	s.fd = fd

	poolLen := int(cfg.NumFrames) * int(cfg.FrameSize)
	umemLen := poolLen + int(cfg.TxSpans)*int(cfg.SpanFrames)*int(cfg.FrameSize)
	s.umem, err = unix.Mmap(-1, 0, umemLen, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap umem of %d bytes: %w", umemLen, err)
	}
	reg := unix.XDPUmemReg{
		Addr:     uint64(uintptr(unsafe.Pointer(&s.umem[0]))),
		Len:      uint64(umemLen),
		Size:     cfg.FrameSize,
		Headroom: cfg.Headroom,
	}
	if err := setsockopt(fd, unix.SOL_XDP, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		if errors.Is(err, unix.ENOBUFS) {
			return fmt.Errorf("XDP_UMEM_REG: %w (over RLIMIT_MEMLOCK without CAP_IPC_LOCK?)", err)
		}
		return fmt.Errorf("XDP_UMEM_REG: %w", err)
	}
	s.pool = NewFramePool(cfg.NumFrames, cfg.FrameSize)
	s.spans.init(uint64(poolLen), cfg.TxSpans, cfg.SpanFrames, cfg.FrameSize)

	type ringOpt struct {
		name string
		opt  int
		size uint32
	}
	opts := []ringOpt{
		{"fill", unix.XDP_UMEM_FILL_RING, cfg.FillSize},
		{"completion", unix.XDP_UMEM_COMPLETION_RING, cfg.CompletionSize},
	}
	if !cfg.NoRX {
		opts = append(opts, ringOpt{"rx", unix.XDP_RX_RING, cfg.RxSize})
	}
	if !cfg.NoTX {
		opts = append(opts, ringOpt{"tx", unix.XDP_TX_RING, cfg.TxSize})
	}
	for _, o := range opts {
		if err := setsockoptU32(fd, unix.SOL_XDP, o.opt, o.size); err != nil {
			return fmt.Errorf("set %s ring size %d: %w", o.name, o.size, err)
		}
	}

	var off unix.XDPMmapOffsets
	n, err := getsockopt(fd, unix.SOL_XDP, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off))
	if err != nil {
		return fmt.Errorf("XDP_MMAP_OFFSETS: %w", err)
	}
	if n != unsafe.Sizeof(off) {
		// Kernels before 5.4 have no flags word: need_wakeup is unknown.
		return fmt.Errorf("XDP_MMAP_OFFSETS returned %d bytes, want %d (kernel older than 5.4)", n, unsafe.Sizeof(off))
	}
	mapRing := func(pgoff uint64, ro unix.XDPRingOffset, size uint32, elem uint64) ([]byte, error) {
		m, err := unix.Mmap(fd, int64(pgoff), int(ro.Desc+uint64(size)*elem),
			unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err == nil {
			s.maps = append(s.maps, m)
		}
		return m, err
	}
	m, err := mapRing(unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, cfg.FillSize, 8)
	if err != nil {
		return fmt.Errorf("mmap fill ring: %w", err)
	}
	s.Fill = newFillRing(m, off.Fr, cfg.FillSize)
	if m, err = mapRing(unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, cfg.CompletionSize, 8); err != nil {
		return fmt.Errorf("mmap completion ring: %w", err)
	}
	s.Completion = newCompletionRing(m, off.Cr, cfg.CompletionSize)
	if !cfg.NoRX {
		if m, err = mapRing(unix.XDP_PGOFF_RX_RING, off.Rx, cfg.RxSize, descSize); err != nil {
			return fmt.Errorf("mmap rx ring: %w", err)
		}
		s.RX = newRxRing(m, off.Rx, cfg.RxSize)
	}
	if !cfg.NoTX {
		if m, err = mapRing(unix.XDP_PGOFF_TX_RING, off.Tx, cfg.TxSize, descSize); err != nil {
			return fmt.Errorf("mmap tx ring: %w", err)
		}
		s.TX = newTxRing(m, off.Tx, cfg.TxSize)
	}

	if cfg.BusyPoll != nil {
		s.info.BusyPollErr = setBusyPoll(fd, *cfg.BusyPoll)
	}
	if err := s.bind(ifindex, queue, cfg); err != nil {
		return err
	}
	if !cfg.NoTX {
		// After the TX ring exists: the kernel checks the budget against
		// the ring's size.
		if err := setsockoptU32(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, cfg.TxSkbBudget); err != nil {
			s.info.TxSkbBudgetErr = err
		} else {
			s.info.TxSkbBudget = cfg.TxSkbBudget
		}
	}
	var xo struct{ flags uint32 } // struct xdp_options
	if _, err := getsockopt(fd, unix.SOL_XDP, unix.XDP_OPTIONS, unsafe.Pointer(&xo), unsafe.Sizeof(xo)); err != nil {
		return fmt.Errorf("XDP_OPTIONS: %w", err)
	}
	s.info.ZeroCopy = xo.flags&unix.XDP_OPTIONS_ZEROCOPY != 0
	s.pollfd = unix.PollFd{Fd: int32(fd)}
	return nil
}

// bind binds zero-copy first (ModeAuto), falling back to copy mode on
// EOPNOTSUPP or EINVAL, and retries EBUSY until BindTimeout.
func (s *Socket) bind(ifindex int, queue uint32, cfg Config) error {
	var flags uint16
	if !cfg.NoNeedWakeup {
		flags |= unix.XDP_USE_NEED_WAKEUP
	}
	if cfg.SG {
		flags |= unix.XDP_USE_SG
	}
	s.info.NeedWakeup = !cfg.NoNeedWakeup
	s.info.SG = cfg.SG

	deadline := time.Now().Add(cfg.BindTimeout)
	try := func(mode uint16) error {
		backoff := time.Millisecond
		for {
			s.info.BindAttempts++
			err := unix.Bind(s.fd, &unix.SockaddrXDP{Flags: flags | mode, Ifindex: uint32(ifindex), QueueID: queue})
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				return err
			}
			// The queue's previous socket is still being torn down (the
			// kernel releases it from a workqueue).
			time.Sleep(backoff)
			s.info.BindWait += backoff
			backoff = min(2*backoff, 16*time.Millisecond)
		}
	}
	switch cfg.Mode {
	case ModeCopy:
		if err := try(unix.XDP_COPY); err != nil {
			return fmt.Errorf("bind (copy): %w", err)
		}
	case ModeZeroCopy:
		if err := try(unix.XDP_ZEROCOPY); err != nil {
			return fmt.Errorf("bind (zero-copy): %w", err)
		}
	default:
		err := try(unix.XDP_ZEROCOPY)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("bind (zero-copy): %w", err)
		}
		s.info.ZeroCopyErr = err
		if err := try(unix.XDP_COPY); err != nil {
			return fmt.Errorf("bind (copy, after zero-copy failed with %v): %w", s.info.ZeroCopyErr, err)
		}
	}
	return nil
}

// setBusyPoll sets the busy-poll options one by one and returns the refusals.
func setBusyPoll(fd int, bp BusyPoll) error {
	var errs []error
	for _, o := range []struct {
		name string
		opt  int
		v    int
	}{
		{"SO_PREFER_BUSY_POLL", unix.SO_PREFER_BUSY_POLL, 1},
		{"SO_BUSY_POLL", unix.SO_BUSY_POLL, bp.Usecs},
		{"SO_BUSY_POLL_BUDGET", unix.SO_BUSY_POLL_BUDGET, bp.Budget},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o.opt, o.v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", o.name, err))
		}
	}
	return errors.Join(errs...)
}

// Close unbinds the socket and frees the UMEM and the rings. The queue can be
// bound again soon after, though the kernel answers EBUSY for some
// milliseconds (Open retries). Frames and descriptors obtained from the
// socket are invalid afterwards.
func (s *Socket) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if s.fd >= 0 {
		errs = append(errs, unix.Close(s.fd))
		s.fd = -1
	}
	for _, m := range s.maps {
		errs = append(errs, unix.Munmap(m))
	}
	s.maps = nil
	if s.umem != nil {
		errs = append(errs, unix.Munmap(s.umem))
		s.umem = nil
	}
	return errors.Join(errs...)
}

// FD is the socket's file descriptor: put it in the XSKMAP at the queue's
// index, or in a poll set with other fds.
func (s *Socket) FD() int { return s.fd }

// Info describes how the socket was bound.
func (s *Socket) Info() Info { return s.info }

// Pool is the socket's frame pool.
func (s *Socket) Pool() *FramePool { return s.pool }

// UMEM is the whole frame area.
func (s *Socket) UMEM() []byte { return s.umem }

// Frame returns the n bytes at UMEM offset addr (a descriptor's Addr and
// Len), without copying.
func (s *Socket) Frame(addr uint64, n uint32) []byte {
	return s.umem[addr : addr+uint64(n) : addr+uint64(n)]
}

// FrameBuf returns the rest of the frame from addr on, for writing a packet
// to send. Its length bounds the packet.
func (s *Socket) FrameBuf(addr uint64) []byte {
	end := s.pool.FrameStart(addr) + uint64(s.pool.frameSize)
	return s.umem[addr:end:end]
}

// RxOffset is how far into a frame the kernel puts received data: the
// 256-byte XDP headroom plus Config.Headroom.
func (s *Socket) RxOffset() uint64 { return s.headOff }

// InFlight returns how many frames the kernel holds: put in the fill ring and
// not yet come back on the RX ring (peeked descriptors count as back), and
// put in the TX ring and not yet come back on the completion ring. A TX
// descriptor the kernel rejects as invalid (Stats.TxInvalidDescs) never comes
// back and stays counted here.
func (s *Socket) InFlight() (rx, tx uint32) {
	rx = s.Fill.prod - s.RX.peeked
	tx = s.TX.prod - s.Completion.peeked
	return rx, tx
}

// Stats are the kernel's counters for the socket (XDP_STATISTICS).
type Stats struct {
	RxDropped            uint64 // dropped for reasons other than a full ring or empty fill ring
	RxInvalidDescs       uint64 // RX frames too long for a frame
	TxInvalidDescs       uint64 // TX descriptors with a bad address or length
	RxRingFull           uint64 // dropped: RX ring full
	RxFillRingEmptyDescs uint64 // dropped: fill ring empty
	TxRingEmptyDescs     uint64 // kicks that found the TX ring empty
}

// Stats reads the kernel's counters (one getsockopt; cold path).
func (s *Socket) Stats() (Stats, error) {
	var st unix.XDPStatistics
	n, err := getsockopt(s.fd, unix.SOL_XDP, unix.XDP_STATISTICS, unsafe.Pointer(&st), unsafe.Sizeof(st))
	if err != nil {
		return Stats{}, fmt.Errorf("xsk: XDP_STATISTICS: %w", err)
	}
	_ = n // older kernels fill a prefix; the rest stays zero
	return Stats{
		RxDropped:            st.Rx_dropped,
		RxInvalidDescs:       st.Rx_invalid_descs,
		TxInvalidDescs:       st.Tx_invalid_descs,
		RxRingFull:           st.Rx_ring_full,
		RxFillRingEmptyDescs: st.Rx_fill_ring_empty_descs,
		TxRingEmptyDescs:     st.Tx_ring_empty_descs,
	}, nil
}

// Counters are the socket's own counters. Only the owner goroutine writes
// them (once per batch); any goroutine may read them.
type Counters struct {
	TxKicks      uint64 // sendto calls
	TxKickBusy   uint64 // sendto answered EAGAIN, EBUSY or ENOBUFS: try again
	RxWakeups    uint64 // recvfrom calls for a fill ring that needed a wakeup
	Waits        uint64 // Wait calls that blocked in poll
	TxRingFull   uint64 // Transmit calls that could not queue everything
	FillRingFull uint64 // Refill calls that left frames in the pool for lack of room
}

type counters struct {
	txKicks, txKickBusy, rxWakeups, waits, txRingFull, fillRingFull atomic.Uint64
}

// Counters reads the socket's counters.
func (s *Socket) Counters() Counters {
	c := &s.counters
	return Counters{
		TxKicks:      c.txKicks.Load(),
		TxKickBusy:   c.txKickBusy.Load(),
		RxWakeups:    c.rxWakeups.Load(),
		Waits:        c.waits.Load(),
		TxRingFull:   c.txRingFull.Load(),
		FillRingFull: c.fillRingFull.Load(),
	}
}
