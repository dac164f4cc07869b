package afxdp

import (
	"fmt"

	"github.com/metaroce/metaroce/dataplane/xsk"
)

const (
	// SingleBufferMTU is the largest MTU run with one UMEM frame per
	// packet. Above it the steering program must be the
	// BPF_F_XDP_HAS_FRAGS variant (a native XDP program without it does
	// not attach above an MTU of about 3506 on veth, measured), and its
	// sockets are bound with XDP_USE_SG.
	SingleBufferMTU = 3500
	// rxSlack is what a received Ethernet frame may carry beyond the IP
	// packet: the 14-byte Ethernet header and a 4-byte VLAN tag.
	rxSlack = 14 + 4
	// kernelHeadroom is XDP_PACKET_HEADROOM, in front of every RX buffer.
	kernelHeadroom = 256
	// ipUDP4 and ipUDP6 are the IP and UDP header bytes per family.
	ipUDP4, ipUDP6 = 20 + 8, 40 + 8
	// maxMTU is the largest MTU the link runs (the config's limit).
	maxMTU = 9216
	// scratchHandle marks an RxPacket.Handle that names a scratch buffer
	// rather than a UMEM frame (UMEM offsets stay far below 2^63).
	scratchHandle = 1 << 63
)

// sizing is what plan decided.
type sizing struct {
	mtu        int
	maxPayload int // UDP payload per packet: the MTU's, for the family
	rxFrame    int // longest Ethernet frame received: a scratch buffer
}

// plan fills in the socket configuration an MTU needs. Up to
// SingleBufferMTU a packet is one frame: 2048-byte frames when the frame
// fits (MTU up to 1774), else 4096. Above it: 4096-byte frames (unless
// set), XDP_USE_SG, and TX spans long enough for the largest packet with
// the link's fixed headroom in front (3 frames at MTU 9000, 2 at 4200),
// as many as the TX ring holds chains of.
func plan(mtu int, is6 bool, c xsk.Config) (xsk.Config, sizing, error) {
	if mtu == 0 {
		mtu = 1500
	}
	if mtu < 576 || mtu > maxMTU {
		return c, sizing{}, fmt.Errorf("mtu %d: want 576 to %d", mtu, maxMTU)
	}
	z := sizing{mtu: mtu, maxPayload: mtu - ipUDP4, rxFrame: rxSlack + mtu}
	if is6 {
		z.maxPayload = mtu - ipUDP6
	}
	tx := headroom + z.maxPayload // bytes of a TX buffer from its start
	if mtu > SingleBufferMTU {
		c.SG = true
	}
	if c.FrameSize == 0 {
		c.FrameSize = 2048
		if c.SG || z.rxFrame > 2048-kernelHeadroom-int(c.Headroom) || tx > 2048 {
			c.FrameSize = 4096
		}
	}
	fs := int(c.FrameSize)
	if z.rxFrame > fs-kernelHeadroom-int(c.Headroom) {
		c.SG = true
	}
	if tx > fs {
		if !c.SG {
			return c, sizing{}, fmt.Errorf("mtu %d needs %d-byte transmit buffers: more than a %d-byte frame without multi-buffer", mtu, tx, fs)
		}
		c.SpanFrames = uint32((tx + fs - 1) / fs)
		if c.TxSpans == 0 {
			ts := c.TxSize
			if ts == 0 {
				ts = 2048 // xsk's default ring size
			}
			c.TxSpans = ts / c.SpanFrames
		}
	}
	return c, z, nil
}

// scratch is the link's set of contiguous receive buffers for packets
// gathered from descriptor chains: allocated once at Open, handed out and
// taken back by slot number, never allocating after. Owned by the engine
// goroutine.
type scratch struct {
	mem  []byte
	size int
	free []int32 // free slot numbers
}

func (s *scratch) init(slots, size int) {
	s.mem = make([]byte, slots*size)
	s.size = size
	s.free = make([]int32, slots)
	for i := range s.free {
		s.free[i] = int32(slots - 1 - i)
	}
}

// get takes a free buffer (empty, with its whole size as capacity) and its
// slot; -1 and nil when none is free.
func (s *scratch) get() (int, []byte) {
	n := len(s.free)
	if n == 0 {
		return -1, nil
	}
	i := int(s.free[n-1])
	s.free = s.free[:n-1]
	return i, s.mem[i*s.size : i*s.size : (i+1)*s.size]
}

// put returns slot i; -1 is ignored.
func (s *scratch) put(i int) {
	if i < 0 {
		return
	}
	if len(s.free) == cap(s.free) {
		panic("afxdp: scratch buffer returned twice")
	}
	s.free = append(s.free, int32(i))
}
