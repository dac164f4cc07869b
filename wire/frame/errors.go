package frame

import "errors"

// Reason says why Parse rejected a frame. It is an error, so Parse can
// return it as one, and it is a small integer, so a hot path can count
// drops without allocating or comparing strings:
//
//	var drops [frame.NumReasons]uint64
//	if err := p.Parse(b, &f); err != nil {
//		drops[err.(frame.Reason)]++
//		continue
//	}
//
// Converting a Reason to an error does not allocate: the runtime boxes
// one-byte values without a heap allocation.
type Reason uint8

// The reasons, roughly in the order Parse checks for them (outermost header
// first). Zero is not a reason, so a counter array indexed by Reason has
// slot 0 free for "accepted".
const (
	// ErrTooShort: the frame, or the IP packet inside it, ends before a
	// header that must be present (Ethernet, the VLAN tag, the IP header
	// including the IPv4 options its IHL announces, the UDP header).
	ErrTooShort Reason = iota + 1
	// ErrNotIP: the EtherType, after at most one 802.1Q tag, is neither
	// IPv4 nor IPv6. Stacked tags (QinQ, 802.1ad) land here too.
	ErrNotIP
	// ErrBadIPHeader: the IP version nibble disagrees with the EtherType,
	// or an IPv4 IHL is below 5.
	ErrBadIPHeader
	// ErrBadIPChecksum: the IPv4 header checksum is wrong.
	ErrBadIPChecksum
	// ErrBadIPLength: the IPv4 total length is shorter than the header or
	// longer than the frame, or the IPv6 payload length is longer than the
	// frame.
	ErrBadIPLength
	// ErrFragment: an IPv4 fragment (MF set or a nonzero offset).
	// MetaRoCE sizes its packets to the path MTU and never fragments, so a
	// fragment is someone else's traffic or an attack on reassembly.
	ErrFragment
	// ErrNotUDP: the IPv4 protocol or the IPv6 next header is not UDP.
	// IPv6 extension headers are not walked, so a UDP datagram behind one
	// is reported here.
	ErrNotUDP
	// ErrBadUDPLength: the UDP length is below 8 or runs past the end of
	// the IP packet.
	ErrBadUDPLength
	// ErrBadUDPChecksum: the UDP checksum is wrong, or is zero on IPv6.
	ErrBadUDPChecksum

	// NumReasons bounds the Reason values, for sizing counter arrays.
	NumReasons = iota + 1
)

var reasonText = [NumReasons]string{
	0:                 "frame: no error",
	ErrTooShort:       "frame: too short",
	ErrNotIP:          "frame: not IPv4 or IPv6",
	ErrBadIPHeader:    "frame: bad IP version or header length",
	ErrBadIPChecksum:  "frame: bad IPv4 header checksum",
	ErrBadIPLength:    "frame: bad IP length",
	ErrFragment:       "frame: IPv4 fragment",
	ErrNotUDP:         "frame: not UDP",
	ErrBadUDPLength:   "frame: bad UDP length",
	ErrBadUDPChecksum: "frame: bad UDP checksum",
}

func (r Reason) Error() string {
	if int(r) < len(reasonText) {
		return reasonText[r]
	}
	return "frame: unknown reason"
}

var reasonName = [NumReasons]string{
	0:                 "none",
	ErrTooShort:       "too_short",
	ErrNotIP:          "not_ip",
	ErrBadIPHeader:    "bad_ip_header",
	ErrBadIPChecksum:  "bad_ip_checksum",
	ErrBadIPLength:    "bad_ip_length",
	ErrFragment:       "fragment",
	ErrNotUDP:         "not_udp",
	ErrBadUDPLength:   "bad_udp_length",
	ErrBadUDPChecksum: "bad_udp_checksum",
}

// Name returns a short name for r, fit for a metrics label.
func (r Reason) Name() string {
	if int(r) < len(reasonName) {
		return reasonName[r]
	}
	return "unknown"
}

// String returns the same text as Error, so a Reason prints the same way
// whether it is held as a Reason (a metrics label) or as an error.
func (r Reason) String() string { return r.Error() }

// Errors from Build and Finish. These report a caller's mistake, not a bad
// packet from the network, so they are plain sentinels.
var (
	// ErrShortBuffer: the buffer cannot hold the headers and payload.
	ErrShortBuffer = errors.New("frame: buffer too short")
	// ErrPayloadTooLarge: the payload is negative or does not fit in the
	// 16-bit IP and UDP length fields.
	ErrPayloadTooLarge = errors.New("frame: payload too large")
	// ErrAddrFamily: an address is invalid, or the two are of different
	// families.
	ErrAddrFamily = errors.New("frame: source and destination must both be IPv4 or both be IPv6")
	// ErrBadDSCP: DSCP does not fit in 6 bits.
	ErrBadDSCP = errors.New("frame: DSCP above 63")
	// ErrBadECN: ECN does not fit in 2 bits.
	ErrBadECN = errors.New("frame: ECN above 3")
	// ErrNotBuilt: Finish was handed a buffer whose headers are not the
	// ones Build writes.
	ErrNotBuilt = errors.New("frame: headers not written by Build")
)
