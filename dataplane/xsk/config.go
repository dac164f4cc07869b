package xsk

import (
	"fmt"
	"os"
	"time"
)

// BindMode chooses between zero-copy and copy mode.
type BindMode uint8

const (
	// ModeAuto asks for zero-copy and falls back to copy mode when the
	// driver refuses (veth: EOPNOTSUPP). Info says which one was bound.
	ModeAuto BindMode = iota
	// ModeCopy binds in copy mode only.
	ModeCopy
	// ModeZeroCopy binds in zero-copy mode or fails.
	ModeZeroCopy
)

func (m BindMode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeCopy:
		return "copy"
	case ModeZeroCopy:
		return "zero-copy"
	}
	return fmt.Sprintf("BindMode(%d)", uint8(m))
}

// BusyPoll asks the kernel to busy-poll the device's NAPI from the socket's
// syscalls instead of waiting for interrupts (SO_PREFER_BUSY_POLL,
// SO_BUSY_POLL, SO_BUSY_POLL_BUDGET). Raising them needs CAP_NET_ADMIN.
type BusyPoll struct {
	Usecs  int // SO_BUSY_POLL, microseconds per busy-poll; 0 means 20
	Budget int // SO_BUSY_POLL_BUDGET, packets per busy-poll; 0 means 64
}

// Config describes a socket and its UMEM. The zero value is valid: every zero
// field takes the default written beside it, and Open reports the resolved
// values in Info.Config.
type Config struct {
	// FrameSize is the UMEM chunk size: 2048 or 4096 (the page size; 8192
	// fails at XDP_UMEM_REG). Default 2048. In copy mode a received frame
	// must fit in FrameSize minus the 256-byte kernel headroom minus
	// Headroom; larger frames need SG.
	FrameSize uint32
	// NumFrames is the number of UMEM frames. Default 4096 (8 MiB of
	// 2048-byte frames, the memlock limit for a process without
	// CAP_IPC_LOCK).
	NumFrames uint32
	// Headroom is extra space the kernel leaves before each received frame,
	// after its own 256 bytes (XDP_PACKET_HEADROOM). Default 0.
	Headroom uint32

	// Ring sizes, powers of two. FillSize and CompletionSize default to
	// 2048, RxSize and TxSize to 2048. NoRX or NoTX leaves that ring out
	// (a pure sender or receiver); not both.
	FillSize, CompletionSize, RxSize, TxSize uint32
	NoRX, NoTX                               bool

	// Mode chooses zero-copy or copy mode. Default ModeAuto.
	Mode BindMode
	// NoNeedWakeup binds without XDP_USE_NEED_WAKEUP: the kernel never sets
	// the ring flags and every TX batch costs a sendto. For measurement.
	NoNeedWakeup bool
	// SG binds with XDP_USE_SG: packets larger than a frame arrive and may be
	// sent as several descriptors chained with PktContd. The XDP program
	// must be loaded with BPF_F_XDP_HAS_FRAGS.
	SG bool
	// TxSpans is the number of TX spans: runs of SpanFrames consecutive
	// frames, in the UMEM after the NumFrames frames of the pool, into which
	// a packet longer than a frame is written in one piece and sent as a
	// chain of descriptors (GetSpan, Split). Default 0: none. Spans longer
	// than one frame need SG.
	TxSpans uint32
	// SpanFrames is the length of a TX span in frames: 1 to 18 (the
	// kernel's longest TX chain). Default 1 when TxSpans is set.
	SpanFrames uint32
	// TxSkbBudget is XDP_MAX_TX_SKB_BUDGET: how many frames one sendto may
	// send in copy mode (the kernel's default is 32). Default 256 (+28%
	// measured on veth), capped at TxSize: the kernel answers EACCES outside
	// 32..TxSize. The option is write-only. A refusal, or a kernel without
	// the option (ENOPROTOOPT), is reported in Info, not failed.
	TxSkbBudget uint32
	// BusyPoll, if set, turns busy polling on (see BusyPoll). Refusals are
	// reported in Info, not failed.
	BusyPoll *BusyPoll
	// BindTimeout bounds the retries of a bind that fails with EBUSY, which
	// the kernel returns for 5 to 130 ms (measured) after the queue's
	// previous socket closed. Default 500 ms.
	BindTimeout time.Duration
}

// Defaults, with their reasons in Config's field comments.
const (
	defaultFrameSize   = 2048
	defaultNumFrames   = 4096
	defaultRingSize    = 2048
	defaultTxSkbBudget = 256
	defaultBindTimeout = 500 * time.Millisecond
	defaultBusyUsecs   = 20
	defaultBusyBudget  = 64

	// kernelHeadroom is XDP_PACKET_HEADROOM: the kernel puts RX data this
	// far into a frame in copy mode (and most drivers do in zero-copy).
	kernelHeadroom = 256
	// minTxSkbBudget is the kernel's TX_BATCH_SIZE, the smallest budget
	// XDP_MAX_TX_SKB_BUDGET accepts.
	minTxSkbBudget = 32
)

// resolve fills in defaults and validates, returning the spec Open builds
// from.
func (c Config) resolve() (Config, error) {
	if c.FrameSize == 0 {
		c.FrameSize = defaultFrameSize
	}
	if c.NumFrames == 0 {
		c.NumFrames = defaultNumFrames
	}
	for _, p := range []*uint32{&c.FillSize, &c.CompletionSize, &c.RxSize, &c.TxSize} {
		if *p == 0 {
			*p = defaultRingSize
		}
	}
	if c.TxSkbBudget == 0 {
		c.TxSkbBudget = defaultTxSkbBudget
	}
	c.TxSkbBudget = max(min(c.TxSkbBudget, c.TxSize), minTxSkbBudget)
	if c.BindTimeout == 0 {
		c.BindTimeout = defaultBindTimeout
	}
	if c.BusyPoll != nil {
		bp := *c.BusyPoll
		if bp.Usecs == 0 {
			bp.Usecs = defaultBusyUsecs
		}
		if bp.Budget == 0 {
			bp.Budget = defaultBusyBudget
		}
		c.BusyPoll = &bp
	}

	page := uint32(os.Getpagesize())
	if c.FrameSize < 2048 || c.FrameSize > page || c.FrameSize&(c.FrameSize-1) != 0 {
		return c, fmt.Errorf("xsk: frame size %d: want a power of two from 2048 to the page size %d", c.FrameSize, page)
	}
	if c.Headroom+kernelHeadroom >= c.FrameSize {
		return c, fmt.Errorf("xsk: headroom %d leaves no room in a %d-byte frame", c.Headroom, c.FrameSize)
	}
	for _, r := range []struct {
		name string
		v    uint32
	}{{"fill", c.FillSize}, {"completion", c.CompletionSize}, {"rx", c.RxSize}, {"tx", c.TxSize}} {
		if r.v&(r.v-1) != 0 || r.v > 1<<24 {
			return c, fmt.Errorf("xsk: %s ring size %d is not a power of two up to 2^24", r.name, r.v)
		}
	}
	if c.TxSpans > 0 && c.SpanFrames == 0 {
		c.SpanFrames = 1
	}
	if c.TxSpans > 0 && (c.SpanFrames > maxChain || c.SpanFrames > 1 && !c.SG) {
		return c, fmt.Errorf("xsk: tx spans of %d frames: want 1 to %d, and more than 1 only with SG", c.SpanFrames, maxChain)
	}
	if uint64(c.NumFrames)+uint64(c.TxSpans)*uint64(c.SpanFrames) > 1<<24 {
		return c, fmt.Errorf("xsk: %d frames and %d tx spans of %d frames: UMEM too large", c.NumFrames, c.TxSpans, c.SpanFrames)
	}
	if c.NoRX && c.NoTX {
		return c, fmt.Errorf("xsk: a socket needs an RX or a TX ring")
	}
	if c.Mode > ModeZeroCopy {
		return c, fmt.Errorf("xsk: unknown bind mode %d", c.Mode)
	}
	return c, nil
}

// MaxFrameLen is the longest frame one RX buffer holds: the frame minus the
// kernel's and the configured headroom.
func (c Config) MaxFrameLen() uint32 {
	r, err := c.resolve()
	if err != nil {
		return 0
	}
	return r.FrameSize - kernelHeadroom - r.Headroom
}
