package ring

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// The shared-memory layout of a ring, version 1. Every word is a uint32 in
// the host's byte order: both sides run on one host.
//
//	offset  size  owner     field
//	     0     4  creator   magic (ringMagic)
//	     4     4  creator   version (ringVersion)
//	     8     4  creator   slot size in bytes
//	    12     4  creator   slot count (a power of two)
//	    16    48  -         reserved, zero
//	    64     4  producer  producer index (free-running)
//	   128     4  consumer  consumer index (free-running)
//	   192     4  consumer  need-wakeup flag (the producer clears it when it rings)
//	   256     -  both      slots: slot i at 256 + (i & (count-1)) * slot size
//
// The three index words sit on cache lines of their own so that the
// producer's stores and the consumer's stores do not bounce one line between
// the two cores. The first 16 bytes are written once, before the file
// descriptor is handed to anyone, and are read once by Attach.
const (
	offMagic    = 0
	offVersion  = 4
	offSlotSize = 8
	offSlots    = 12
	offProducer = 1 * cacheLine
	offConsumer = 2 * cacheLine
	offFlags    = 3 * cacheLine
	headerSize  = 4 * cacheLine // offset of slot 0

	// cacheLine is 64 bytes on every CPU we run on (amd64, arm64). Were it
	// 128 (Apple M-series), the words would share no line anyway, since
	// the producer's and consumer's are 64 bytes apart and each side also
	// writes only its own; only adjacent-line prefetch could pair them.
	cacheLine = 64

	// ringMagic is "MRRG" read as a little-endian uint32.
	ringMagic   = 0x4752524d
	ringVersion = 1
)

// Geometry limits. They keep every offset computation far inside int on
// 64-bit hosts and the mapping a sane size, whatever a hostile header says.
const (
	// MinSlotSize is the smallest slot: one uint64.
	MinSlotSize = 8
	// MaxSlotSize bounds one record (a work request or completion is far
	// smaller; a mailbox of packet descriptors too).
	MaxSlotSize = 1 << 16
	// SlotAlign: slot sizes are multiples of 8, so that every slot, like
	// slot 0 at offset 256 of a page-aligned mapping, is 8-byte aligned and
	// may hold uint64 fields read with atomics or plain loads.
	SlotAlign = 8
	// MaxSlots bounds the slot count. Free-running uint32 indices need the
	// count to be at most 2^31 to tell a full ring from an empty one; we
	// stop far earlier.
	MaxSlots = 1 << 24
	// MaxRingBytes bounds the slot array (and so the mapping Attach will
	// accept) to 1 GiB.
	MaxRingBytes = 1 << 30
)

// ErrBadHeader is wrapped by every Attach error about the ring's contents or
// its file: the peer handed us something that is not a ring we can trust.
var ErrBadHeader = errors.New("ring: bad ring header")

// geometry is a validated header: the only copy of the ring's shape that the
// rest of the package reads. It is taken once, so a peer rewriting the header
// later changes nothing on our side.
type geometry struct {
	slotSize uint32
	slots    uint32 // power of two
}

// bytes is the mapping size the geometry needs: header plus slot array.
func (g geometry) bytes() int64 {
	return headerSize + int64(g.slots)*int64(g.slotSize)
}

// checkGeometry validates a slot count and slot size, from Create's caller
// or from a header.
func checkGeometry(slots, slotSize uint64) (geometry, error) {
	switch {
	case slots == 0 || slots > MaxSlots || bits.OnesCount64(slots) != 1:
		return geometry{}, fmt.Errorf("slot count %d is not a power of two in [1, %d]", slots, MaxSlots)
	case slotSize < MinSlotSize || slotSize > MaxSlotSize || slotSize%SlotAlign != 0:
		return geometry{}, fmt.Errorf("slot size %d is not a multiple of %d in [%d, %d]",
			slotSize, SlotAlign, MinSlotSize, MaxSlotSize)
	case slots*slotSize > MaxRingBytes: // both factors are small: no overflow
		return geometry{}, fmt.Errorf("%d slots of %d bytes exceed %d bytes", slots, slotSize, MaxRingBytes)
	}
	return geometry{slotSize: uint32(slotSize), slots: uint32(slots)}, nil
}

// putHeader writes the immutable part of the header (the first 16 bytes of
// b) for g. The index and flag words are left as they are (zero in a fresh
// file).
func putHeader(b []byte, g geometry) {
	_ = b[offSlots+3]
	*(*uint32)(unsafe.Pointer(&b[offMagic])) = ringMagic
	*(*uint32)(unsafe.Pointer(&b[offVersion])) = ringVersion
	*(*uint32)(unsafe.Pointer(&b[offSlotSize])) = g.slotSize
	*(*uint32)(unsafe.Pointer(&b[offSlots])) = g.slots
}

// readHeader copies the immutable header words out of a mapping with atomic
// loads: the peer may be writing them while we read, and each word must be
// read exactly once (validate the copy, never the shared original).
func readHeader(mem []byte) (h [16]byte) {
	_ = mem[offSlots+3]
	for off := 0; off < len(h); off += 4 {
		v := atomic.LoadUint32((*uint32)(unsafe.Pointer(&mem[off])))
		*(*uint32)(unsafe.Pointer(&h[off])) = v
	}
	return h
}

// parseHeader validates a header copy against the size of the file it came
// from. It is pure, so it is fuzzed directly.
func parseHeader(h [16]byte, fileSize int64) (geometry, error) {
	word := func(off int) uint32 { return *(*uint32)(unsafe.Pointer(&h[off])) }
	if m := word(offMagic); m != ringMagic {
		return geometry{}, fmt.Errorf("%w: magic %#x, want %#x", ErrBadHeader, m, ringMagic)
	}
	if v := word(offVersion); v != ringVersion {
		return geometry{}, fmt.Errorf("%w: version %d, want %d", ErrBadHeader, v, ringVersion)
	}
	g, err := checkGeometry(uint64(word(offSlots)), uint64(word(offSlotSize)))
	if err != nil {
		return geometry{}, fmt.Errorf("%w: %v", ErrBadHeader, err)
	}
	if need := g.bytes(); need > fileSize {
		return geometry{}, fmt.Errorf("%w: %d slots of %d bytes need %d bytes, the file has %d",
			ErrBadHeader, g.slots, g.slotSize, need, fileSize)
	}
	return g, nil
}
