package xsk

// FramePool is the free list of UMEM frames: a preallocated stack of frame
// start addresses. Fill-ring refills and TX take frames from it; received
// frames and TX completions return to it. It has a single owner (the engine
// goroutine) and no locks; nothing in it allocates after NewFramePool.
//
// The pool tracks only the frames it holds. A frame is at any time in exactly
// one place: the pool, the fill ring or the kernel's RX path, the RX ring or
// the caller's hands, the TX ring or the kernel's TX path, the completion
// ring. Socket.InFlight counts the kernel's share, so that
// Free + InFlight + what the caller holds == Cap is the leak check.
type FramePool struct {
	free      []uint64 // len = frames free, cap = all frames
	frameMask uint64   // frameSize - 1
	frameSize uint32
}

// NewFramePool returns a full pool of numFrames frames of frameSize bytes
// (a power of two) at addresses 0, frameSize, 2*frameSize, ...
func NewFramePool(numFrames, frameSize uint32) *FramePool {
	if frameSize == 0 || frameSize&(frameSize-1) != 0 {
		panic("xsk: frame size must be a power of two")
	}
	p := &FramePool{
		free:      make([]uint64, numFrames),
		frameMask: uint64(frameSize) - 1,
		frameSize: frameSize,
	}
	// Handed out lowest address first, which keeps a lightly loaded
	// socket's working set small.
	for i := range p.free {
		p.free[i] = uint64(numFrames-1-uint32(i)) * uint64(frameSize)
	}
	return p
}

// Get takes a free frame and returns its start address; ok is false when
// the pool is empty.
func (p *FramePool) Get() (addr uint64, ok bool) {
	n := len(p.free)
	if n == 0 {
		return 0, false
	}
	addr = p.free[n-1]
	p.free = p.free[:n-1]
	return addr, true
}

// GetN fills dst with free frames and returns how many it got.
func (p *FramePool) GetN(dst []uint64) int {
	n := min(len(dst), len(p.free))
	top := len(p.free) - n
	copy(dst, p.free[top:])
	p.free = p.free[:top]
	return n
}

// Put returns the frame containing addr (any address inside it: an RX
// descriptor's Addr points past the headroom). Returning more frames than
// exist is a double free and panics rather than corrupt the UMEM.
func (p *FramePool) Put(addr uint64) {
	if len(p.free) == cap(p.free) {
		panic("xsk: frame pool overflow: a frame was returned twice")
	}
	p.free = append(p.free, addr&^p.frameMask)
}

// PutN returns a batch of frames (see Put).
func (p *FramePool) PutN(addrs []uint64) {
	if len(p.free)+len(addrs) > cap(p.free) {
		panic("xsk: frame pool overflow: a frame was returned twice")
	}
	for _, a := range addrs {
		p.free = append(p.free, a&^p.frameMask)
	}
}

// Free is the number of frames in the pool.
func (p *FramePool) Free() int { return len(p.free) }

// Cap is the number of frames the pool manages.
func (p *FramePool) Cap() int { return cap(p.free) }

// FrameSize is the size of one frame in bytes.
func (p *FramePool) FrameSize() uint32 { return p.frameSize }

// FrameStart returns the start address of the frame containing addr.
func (p *FramePool) FrameStart(addr uint64) uint64 { return addr &^ p.frameMask }
