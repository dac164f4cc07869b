package bench

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/wire"
	"github.com/metaroce/metaroce/wire/frame"
)

// The UDP payload of a raw-baseline frame. It is not a MetaRoCE packet: it
// only starts like one, so that the production XDP program (bpf/), which
// checks the first byte for the version and wants at least 12 bytes of
// payload, steers it to the AF_XDP socket.
//
//	0      version (wire.Version, for the XDP program)
//	1      kind: kindBlast or kindProbe
//	2..3   run tag, random per run: a frame of an earlier run (or anyone
//	       else's) does not verify
//	4..11  sequence number, big endian
//	12..19 the sequence number's bitwise complement
//
// The complement is there for two reasons. It is a second check: a frame
// whose sequence number is torn or stale fails it. And it makes the UDP
// checksum independent of the sequence number: each 16-bit word w of the
// number is paired with ^w, and w + ^w = 0xffff, which is zero in ones'
// complement arithmetic, so stamping a new number into a frame whose checksum
// was computed once keeps the checksum right. The blaster therefore writes 16
// bytes per packet and nothing else. Both fields are at even offsets from the
// UDP header, as the checksum's word alignment requires.
const (
	offVersion = 0
	offKind    = 1
	offTag     = 2
	offSeq     = 4
	offInv     = 12
	payloadLen = 20

	kindBlast = 0xb1 // rate-mode frame, A to B
	kindProbe = 0xb2 // latency probe, A to B and reflected back
)

// template is the addressing and size of the frames of one run.
type template struct {
	ep       frame.Endpoints
	frameLen int // whole Ethernet frame, bytes
	hdrLen   int // Ethernet+IP+UDP: frame.HeaderLen of the family
	tag      uint16
}

var errFrameSize = errors.New("bench: frame size out of range")

func newTemplate(ep frame.Endpoints, frameLen int, tag uint16) (template, error) {
	t := template{ep: ep, frameLen: frameLen, hdrLen: frame.HeaderLen(ep.Dst.Is6()), tag: tag}
	if frameLen < t.hdrLen+payloadLen {
		return t, fmt.Errorf("%w: %d bytes is under the %d of headers and the %d-byte payload",
			errFrameSize, frameLen, t.hdrLen, payloadLen)
	}
	return t, nil
}

// build writes a whole frame of the given kind and sequence number into buf,
// checksums included, and returns its length. The payload past the fixed
// fields is zero. Cold path: once per UMEM frame, or once per probe.
func (t *template) build(buf []byte, kind byte, seq uint64) (int, error) {
	if len(buf) < t.frameLen {
		return 0, fmt.Errorf("%w: %d bytes do not fit in a %d-byte buffer", errFrameSize, t.frameLen, len(buf))
	}
	b := buf[:t.frameLen]
	clear(b[t.hdrLen:])
	if _, err := frame.Build(b, &t.ep, 0, 0, t.frameLen-t.hdrLen); err != nil {
		return 0, fmt.Errorf("build frame: %w", err)
	}
	p := b[t.hdrLen:]
	p[offVersion] = wire.Version
	p[offKind] = kind
	binary.BigEndian.PutUint16(p[offTag:], t.tag)
	stamp(p, seq)
	if err := frame.Finish(b); err != nil {
		return 0, fmt.Errorf("finish frame: %w", err)
	}
	return t.frameLen, nil
}

// stamp writes seq and its complement into payload p, leaving the UDP
// checksum valid (see the layout above). Hot path: no allocation.
func stamp(p []byte, seq uint64) {
	binary.BigEndian.PutUint64(p[offSeq:], seq)
	binary.BigEndian.PutUint64(p[offInv:], ^seq)
}

// check reads the sequence number of a received frame f, and reports
// whether f is a frame of this run, of this kind and of the expected length.
// The XDP program has already checked that f is UDP to our port with the
// version byte set; everything after that is checked here. Hot path: a
// length compare and four loads.
func (t *template) check(f []byte, kind byte, frameLen int) (seq uint64, ok bool) {
	if len(f) != frameLen {
		return 0, false
	}
	p := f[t.hdrLen:]
	if p[offKind] != kind || binary.BigEndian.Uint16(p[offTag:]) != t.tag {
		return 0, false
	}
	seq = binary.BigEndian.Uint64(p[offSeq:])
	return seq, seq == ^binary.BigEndian.Uint64(p[offInv:])
}

// checkHead is check for the first buffer of a frame whose length the
// caller adds up (a multi-buffer frame): it needs only the headers and the
// fixed payload fields.
func (t *template) checkHead(f []byte, kind byte) (seq uint64, ok bool) {
	if len(f) < t.hdrLen+payloadLen {
		return 0, false
	}
	p := f[t.hdrLen:]
	if p[offKind] != kind || binary.BigEndian.Uint16(p[offTag:]) != t.tag {
		return 0, false
	}
	seq = binary.BigEndian.Uint64(p[offSeq:])
	return seq, seq == ^binary.BigEndian.Uint64(p[offInv:])
}

// turnAround turns a received frame around in place: it swaps the Ethernet
// addresses and the IP addresses, and keeps the UDP ports, so the reply goes
// to the same MetaRoCE port on the sender, where its XDP program steers it
// to the sender's socket. Swapping two fields of a ones'-complement sum
// leaves the sum unchanged, so the IPv4 header checksum and the UDP checksum
// (whose pseudo-header holds both addresses) stay valid; a router on the way
// back decrements the TTL and fixes the IPv4 checksum as usual. The frame
// must be one this package built (no VLAN tag, no IP options): the sender
// checks the reply.
func turnAround(f []byte, is6 bool) {
	var m [6]byte
	copy(m[:], f[0:6])
	copy(f[0:6], f[6:12])
	copy(f[6:12], m[:])
	src, dst, n := 26, 30, 4 // IPv4: offsets of the addresses in the frame
	if is6 {
		src, dst, n = 22, 38, 16
	}
	for i := 0; i < n; i++ {
		f[src+i], f[dst+i] = f[dst+i], f[src+i]
	}
}

// seqChecker verifies the sequence numbers the sink sees. The blaster sends
// 0, 1, 2, ... on one queue and every hop keeps their order (one veth, or one
// route through the switch), so each valid frame must carry a number above
// the last: a gap is loss, anything else (a duplicate, a reordering, a frame
// that is not ours) is an error, and such frames are not counted as
// received. Owned by the sink goroutine.
type seqChecker struct {
	next     uint64 // lowest sequence number still acceptable
	received uint64 // valid frames
	bad      uint64 // frames that are not ours, of another length, torn
	reorder  uint64 // valid frames at or below an earlier one
}

func (c *seqChecker) observe(seq uint64, ok bool) {
	switch {
	case !ok:
		c.bad++
	case seq < c.next:
		c.reorder++
	default:
		c.received++
		c.next = seq + 1
	}
}
