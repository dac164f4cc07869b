package xsk

// Multi-buffer packets (XDP_USE_SG): the TX spans that let a packet larger
// than a frame be written in one piece and sent as a chain of descriptors,
// the split of such a packet at frame boundaries, and the Assembler that
// gathers a received chain into one buffer. See "Multi-buffer" in the
// package doc.

// maxChain bounds the descriptors of one packet: the kernel builds a
// copy-mode TX skb of one linear part and at most MAX_SKB_FRAGS (17) page
// fragments, and refuses longer chains.
const maxChain = 18

// Split writes into dst the TX descriptors of the packet whose n bytes lie
// contiguously in the UMEM from addr on (in one frame or across the frames
// of a TX span): one descriptor per frame it touches, each inside that
// frame (the kernel rejects a descriptor that crosses a frame in aligned
// mode), PktContd on all but the last. It returns how many it wrote, or 0
// when n is 0 or dst is too short.
func (p *FramePool) Split(addr uint64, n uint32, dst []Desc) int {
	if n == 0 {
		return 0
	}
	k := 0
	for n > 0 {
		if k == len(dst) {
			return 0
		}
		room := uint32(uint64(p.frameSize) - addr&p.frameMask)
		l := min(n, room)
		dst[k] = Desc{Addr: addr, Len: l, Options: PktContd}
		k++
		addr += uint64(l)
		n -= l
	}
	dst[k-1].Options = 0
	return k
}

// spans is the TX span region of the UMEM: Config.TxSpans runs of
// Config.SpanFrames consecutive frames after the NumFrames frames of the
// pool. A span is taken whole and comes back when the completion ring has
// returned every descriptor sent from it. Owned by the engine goroutine.
type spans struct {
	base  uint64   // UMEM offset of the first span
	bytes uint64   // SpanFrames * FrameSize
	end   uint64   // base + TxSpans*bytes
	free  []uint64 // span start addresses; len = spans free
	out   []uint16 // by span index: descriptors sent and not completed
}

func (sp *spans) init(base uint64, count, frames, frameSize uint32) {
	sp.base, sp.bytes = base, uint64(frames)*uint64(frameSize)
	sp.end = base + uint64(count)*sp.bytes
	sp.free = make([]uint64, count)
	sp.out = make([]uint16, count)
	for i := range sp.free {
		sp.free[i] = base + uint64(count-1-uint32(i))*sp.bytes
	}
}

func (sp *spans) has(addr uint64) bool { return addr >= sp.base && addr < sp.end }

// sent counts one descriptor of a span as in the kernel's hands.
func (sp *spans) sent(addr uint64) { sp.out[(addr-sp.base)/sp.bytes]++ }

// completed takes one descriptor back and frees the span with its last.
func (sp *spans) completed(addr uint64) {
	i := (addr - sp.base) / sp.bytes
	if sp.out[i] == 0 {
		panic("xsk: completion for a TX span with nothing in flight")
	}
	sp.out[i]--
	if sp.out[i] == 0 {
		sp.put(sp.base + i*sp.bytes)
	}
}

func (sp *spans) put(start uint64) {
	if len(sp.free) == cap(sp.free) {
		panic("xsk: span pool overflow: a span was returned twice")
	}
	sp.free = append(sp.free, start)
}

// GetSpan takes a free TX span and returns its start address; ok is false
// when none is free (or the socket has none: Config.TxSpans 0). Write the
// packet anywhere in SpanBuf(addr), Split it, and Transmit the descriptors;
// the span returns by itself once all of them have completed.
func (s *Socket) GetSpan() (addr uint64, ok bool) {
	sp := &s.spans
	n := len(sp.free)
	if n == 0 {
		return 0, false
	}
	addr = sp.free[n-1]
	sp.free = sp.free[:n-1]
	return addr, true
}

// PutSpan returns a span that was taken and not transmitted (addr anywhere
// inside it). A span with descriptors in flight must not be put back.
func (s *Socket) PutSpan(addr uint64) {
	sp := &s.spans
	i := (addr - sp.base) / sp.bytes
	if sp.out[i] != 0 {
		panic("xsk: PutSpan of a span in flight")
	}
	sp.put(sp.base + i*sp.bytes)
}

// IsSpan reports whether addr lies in the TX span region.
func (s *Socket) IsSpan(addr uint64) bool { return s.spans.has(addr) }

// SpanBuf returns the rest of the span containing addr from addr on.
func (s *Socket) SpanBuf(addr uint64) []byte {
	sp := &s.spans
	end := sp.base + (addr-sp.base)/sp.bytes*sp.bytes + sp.bytes
	return s.umem[addr:end:end]
}

// SpansFree and SpansCap count the TX spans free and in all: SpansCap -
// SpansFree are in the caller's hands or in flight.
func (s *Socket) SpansFree() int { return len(s.spans.free) }
func (s *Socket) SpansCap() int  { return cap(s.spans.free) }

// Assembler gathers the descriptors of a received multi-buffer packet into
// one contiguous buffer the caller provides. A chain may straddle two
// Receive batches; the Assembler keeps its place between calls. It copies
// and never allocates. The zero value is idle.
type Assembler struct {
	buf    []byte // destination; len = bytes gathered, cap = the limit
	active bool   // a packet has started and its last descriptor not come
	drop   bool   // too long, too many descriptors, or no buffer: discard it
	descs  int
}

// AsmStatus is what Add did with a descriptor.
type AsmStatus uint8

const (
	// AsmMore: the packet continues; nothing to do yet.
	AsmMore AsmStatus = iota
	// AsmDone: that was the last descriptor; the packet is returned.
	AsmDone
	// AsmDropped: that was the last descriptor of a packet that did not
	// fit the buffer (or had none, or more than 18 descriptors); it is
	// discarded and the caller counts it.
	AsmDropped
)

// Idle reports whether no packet is being gathered: the next descriptor
// starts one.
func (a *Assembler) Idle() bool { return !a.active }

// Start begins a packet, to be gathered into buf[:cap(buf)]; a nil buf
// discards it (the caller had no buffer to give).
func (a *Assembler) Start(buf []byte) {
	a.buf, a.active, a.drop, a.descs = buf[:0], true, buf == nil, 0
}

// Add appends src, the bytes of one descriptor, more being its PktContd.
// The frame src lies in may go back to the kernel as soon as Add returns.
// On AsmDone pkt is the whole packet, valid until the buffer is reused.
func (a *Assembler) Add(src []byte, more bool) (pkt []byte, st AsmStatus) {
	if !a.active {
		a.Start(nil)
	}
	a.descs++
	if !a.drop {
		if len(src) > cap(a.buf)-len(a.buf) || a.descs > maxChain {
			a.drop = true
		} else {
			a.buf = append(a.buf, src...) // within cap: no allocation
		}
	}
	if more {
		return nil, AsmMore
	}
	a.active = false
	if a.drop {
		return nil, AsmDropped
	}
	return a.buf, AsmDone
}
