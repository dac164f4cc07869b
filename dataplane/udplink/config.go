package udplink

import (
	"fmt"
	"net/netip"

	"github.com/metaroce/metaroce/wire"
)

// Config describes a link. Every zero field takes the default written beside
// it; Open resolves and validates once, and Link.Config returns the result.
type Config struct {
	// Local is the address to bind, IPv4 or IPv6 (a link-local IPv6 address
	// needs its zone). An IPv4-mapped IPv6 address is taken as IPv4. The
	// link speaks only Local's family: an IPv6 socket is IPV6_V6ONLY.
	Local netip.Addr
	// Port is the MetaRoCE UDP port, both the one bound on Local and the
	// destination of every packet sent: every endpoint binds the same port
	// on its own address. Default wire.DefaultPort (4792).
	Port uint16
	// Batch is the number of datagrams one recvmmsg or sendmmsg moves, and
	// the size of the preallocated vectors. Default 64; at most 1024
	// (UIO_MAXIOV, the kernel's bound on vlen).
	Batch int
	// MaxPayload is the longest UDP payload sent or accepted: a received
	// datagram longer than this is dropped and counted (Counters.Truncated).
	// Default 1452, the payload at MTU 1500 over IPv6 (1500 - 40 - 8), which
	// is transport.Endpoint.MaxPacket at the transport's default MTU.
	MaxPayload int
	// DSCPData and DSCPControl are the DSCP code points of data packets and
	// of control packets (TxPacket.Control). Defaults 26 (AF31) and 48
	// (CS6). Zero means the default, so DSCP 0 cannot be asked for.
	DSCPData, DSCPControl uint8
	// GSO turns on the UDP segmentation offloads where the kernel has them:
	// UDP_SEGMENT on send (runs of packets to one destination go down as
	// one sendmmsg entry) and UDP_GRO on receive (a receive slot may hold
	// several coalesced datagrams, so each slot grows to 64 KiB). What was
	// turned on is in Link.Offloads and Info().Why.
	GSO bool
	// SrcPorts is the number of source ports the link sends from, one
	// send-only socket each, so that the path entropy the transport picks
	// (TxPacket.SrcPort) is the packet's real UDP source port and ECMP
	// spreads the link's packets (see the package doc). 0 means none:
	// every packet leaves from Port and SrcPort is ignored. At most
	// maxSrcPorts.
	SrcPorts int
	// SrcPortMin..SrcPortMax is where Open looks for SrcPorts consecutive
	// ports it can bind on Local (it slides past ports in use); the ports
	// it got are Link.SrcPortRange, the range to give the transport as its
	// entropy range (transport.Config.EntropyMin, EntropyMax). Zero means
	// the transport's default entropy range, 49152..65535.
	SrcPortMin, SrcPortMax uint16
}

// Defaults, with their reasons in Config's field comments.
const (
	defaultBatch       = 64
	defaultMaxPayload  = 1500 - 40 - 8
	defaultDSCPData    = 26
	defaultDSCPControl = 48

	// maxBatch is UIO_MAXIOV: recvmmsg and sendmmsg cap vlen there.
	maxBatch = 1024
	// maxDatagram4 and maxDatagram6 are the longest UDP payloads: the IPv4
	// total length (header included) and the IPv6 payload length (header
	// excluded) are 16-bit fields, and UDP adds 8 bytes.
	maxDatagram4 = 0xffff - 20 - 8
	maxDatagram6 = 0xffff - 8
	// groSlot is the receive slot size with UDP_GRO on: the kernel coalesces
	// up to 64 KiB into one datagram, and a slot must hold all of it or the
	// excess is lost (MSG_TRUNC).
	groSlot = 1 << 16
	// maxGSOSegments bounds the packets in one UDP_SEGMENT send. The kernel
	// allows UDP_MAX_SEGMENTS, 64 before Linux 6.10 and 128 since; 64 works
	// on every kernel with UDP_SEGMENT (4.18+) and already makes one entry
	// of a whole default batch.
	maxGSOSegments = 64
	// sockBuf is the socket buffer size asked for in each direction: room
	// for a few batches of jumbo frames (one batch of 64 x 9000 bytes costs
	// about 1.2 MB of skb truesize) while the engine is busy elsewhere. The
	// kernel caps it at net.core.[rw]mem_max unless the process has
	// CAP_NET_ADMIN (SO_RCVBUFFORCE); Info().Why says what was granted.
	sockBuf = 4 << 20
	// maxSrcPorts bounds the send-socket pool: each is a descriptor, and
	// a batch costs one sendmmsg per socket it touches, so more ports than
	// the transport has paths (at most 256) buy nothing.
	maxSrcPorts = 256
	// defaultSrcPortMin and defaultSrcPortMax are the transport's default
	// entropy range (the IANA dynamic range).
	defaultSrcPortMin = 49152
	defaultSrcPortMax = 65535
)

// resolve fills in defaults and validates, returning the spec Open builds
// from.
func (c Config) resolve() (Config, error) {
	if c.Port == 0 {
		c.Port = wire.DefaultPort
	}
	if c.Batch == 0 {
		c.Batch = defaultBatch
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = defaultMaxPayload
	}
	if c.DSCPData == 0 {
		c.DSCPData = defaultDSCPData
	}
	if c.DSCPControl == 0 {
		c.DSCPControl = defaultDSCPControl
	}
	if c.SrcPortMin == 0 && c.SrcPortMax == 0 {
		c.SrcPortMin, c.SrcPortMax = defaultSrcPortMin, defaultSrcPortMax
	}
	if !c.Local.IsValid() {
		return c, fmt.Errorf("udplink: no local address")
	}
	if c.Local.Is4In6() {
		c.Local = c.Local.Unmap()
	}
	if c.Batch < 1 || c.Batch > maxBatch {
		return c, fmt.Errorf("udplink: batch %d: want 1 to %d", c.Batch, maxBatch)
	}
	maxDgram := maxDatagram6
	if c.Local.Is4() {
		maxDgram = maxDatagram4
	}
	if c.MaxPayload < 1 || c.MaxPayload > maxDgram {
		return c, fmt.Errorf("udplink: max payload %d: want 1 to %d", c.MaxPayload, maxDgram)
	}
	if c.DSCPData > 63 || c.DSCPControl > 63 {
		return c, fmt.Errorf("udplink: DSCP %d/%d: a code point has 6 bits", c.DSCPData, c.DSCPControl)
	}
	if c.SrcPorts < 0 || c.SrcPorts > maxSrcPorts {
		return c, fmt.Errorf("udplink: %d source ports: want 0 to %d", c.SrcPorts, maxSrcPorts)
	}
	if c.SrcPortMin == 0 || c.SrcPortMin > c.SrcPortMax || int(c.SrcPortMax-c.SrcPortMin)+1 < c.SrcPorts {
		return c, fmt.Errorf("udplink: source port range %d..%d: want 1 <= min <= max with room for %d ports",
			c.SrcPortMin, c.SrcPortMax, c.SrcPorts)
	}
	return c, nil
}
