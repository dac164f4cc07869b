package bench

import (
	"errors"
	"fmt"
	"time"

	"github.com/metaroce/metaroce/bpf"
	"github.com/metaroce/metaroce/wire/frame"
)

// Defaults, in one place.
const (
	// DefaultDuration is the length of one measurement.
	DefaultDuration = 2 * time.Second
	// DefaultFrameSize is the Ethernet frame MetaRoCE sends at MTU 1500:
	// 1500 bytes of IP packet plus the 14-byte Ethernet header.
	DefaultFrameSize = 1514
	// DefaultProbeSize is the latency probe: the smallest Ethernet frame
	// (64 bytes, FCS excluded from AF_XDP frames but the usual figure).
	// IPv6 needs at least 82 (62 bytes of headers and our 20 of payload) and
	// takes that.
	DefaultProbeSize = 64
	// DefaultRoundTrips is the number of latency probes: enough for a p99
	// from 100 samples above it, and about a tenth of a second at the
	// measured 7-9 us round trip.
	DefaultRoundTrips = 10000
	// DefaultTxSkbBudget is XDP_MAX_TX_SKB_BUDGET for both AF_XDP layers:
	// 256 frames per sendto measured +28% over the kernel's 32 (docs/platform.md).
	DefaultTxSkbBudget = 256
	// DefaultStreams is the number of TCP connections.
	DefaultStreams = 1

	// rawBatch is the TX and RX batch: descriptors per ring operation.
	rawBatch = 64
	// umemFrames and umemChunk size each UMEM: 4096 chunks of 2048 bytes is
	// 8 MiB, the memlock limit of a process without CAP_IPC_LOCK; a chunk
	// holds a 1514-byte frame after the kernel's 256-byte RX headroom.
	umemFrames = 4096
	umemChunk  = 2048
	ringSize   = 2048
	// probeTimeout is how long the pinger waits for one reply before it
	// counts the probe as lost and sends the next: three orders of
	// magnitude above the round trip, and short enough that a dead
	// reflector costs little.
	probeTimeout = 100 * time.Millisecond
	// drainTimeout bounds the tail of a rate run: how long the blaster waits
	// for its TX ring to empty, and the sink for the last frames in flight
	// (it stops earlier once nothing arrived for drainQuiet).
	drainTimeout = 200 * time.Millisecond
	drainQuiet   = 20 * time.Millisecond
)

// ErrSequence is returned, with the result, when frames the sink received
// failed verification: not of this run, torn, duplicated or out of order.
// Such frames are never counted as received, but a run that saw any is not
// a clean measurement.
var ErrSequence = errors.New("bench: sequence check failed")

// RawOptions configures RawAFXDP and RawAsavie. The zero value is valid.
type RawOptions struct {
	// MTU is the IP MTU the run stands for, 576 to 9216; default 1500.
	// Set it to the MTU MetaRoCE runs at to compare at the same frame size:
	// FrameSize then defaults to MTU+14, the whole Ethernet frame. Above
	// 3500 (or for frames over 3840 bytes) our socket layer runs
	// multi-buffer frames: XDP_USE_SG, the steering program's frags
	// variant, 4096-byte chunks, each frame sent from a TX span as a chain
	// and verified at the sink from its chain without a copy. The asavie
	// backend runs single-buffer frames of up to 1792 bytes only.
	MTU int
	// FrameSize is the Ethernet frame length of the rate run, bytes.
	// Default MTU+14 (DefaultFrameSize at MTU 1500). It must fit the
	// interface's MTU plus 14, and the options' MTU plus 14.
	FrameSize int
	// Duration is the length of the rate run, of which the first tenth
	// (at most 200 ms) is warm-up, not counted in the rates. The latency run
	// is bounded by Duration too. Default DefaultDuration.
	Duration time.Duration
	// RoundTrips is the number of latency probes. Default DefaultRoundTrips;
	// negative skips the latency run.
	RoundTrips int
	// ProbeSize is the Ethernet frame length of a latency probe. Default
	// DefaultProbeSize (82 for IPv6).
	ProbeSize int
	// Port is the MetaRoCE UDP port the XDP program steers. Default
	// bpf.DefaultPort.
	Port uint16
	// IPv6 sends over the hosts' IPv6 addresses instead of IPv4.
	IPv6 bool
	// NoPin leaves the sending and receiving threads unpinned. By default
	// they are pinned to two different CPUs when the process may use two.
	NoPin bool
	// TxSkbBudget is XDP_MAX_TX_SKB_BUDGET on both sockets. Default
	// DefaultTxSkbBudget.
	TxSkbBudget uint32
}

func (o RawOptions) withDefaults() (RawOptions, error) {
	if o.MTU == 0 {
		o.MTU = 1500
	}
	if o.MTU < 576 || o.MTU > 9216 {
		return o, fmt.Errorf("bench: MTU %d: want 576 to 9216", o.MTU)
	}
	if o.FrameSize == 0 {
		o.FrameSize = o.MTU + 14
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.RoundTrips == 0 {
		o.RoundTrips = DefaultRoundTrips
	}
	if o.ProbeSize == 0 {
		o.ProbeSize = DefaultProbeSize
		if o.IPv6 {
			o.ProbeSize = 82
		}
	}
	if o.Port == 0 {
		o.Port = bpf.DefaultPort
	}
	if o.TxSkbBudget == 0 {
		o.TxSkbBudget = DefaultTxSkbBudget
	}
	if o.Duration < 0 {
		return o, fmt.Errorf("bench: negative duration %v", o.Duration)
	}
	maxFrame := o.MTU + 14 // the Ethernet header on the IP MTU
	minFrame := frame.HeaderLen(o.IPv6) + payloadLen
	for _, s := range []int{o.FrameSize, o.ProbeSize} {
		if s > maxFrame || s < minFrame {
			return o, fmt.Errorf("%w: %d bytes (%d to %d: headers and our payload, up to MTU %d plus the Ethernet header)",
				errFrameSize, s, minFrame, maxFrame, o.MTU)
		}
	}
	return o, nil
}

// RawResult is what a raw AF_XDP run measured. Rates are over the
// measurement window (the run less its warm-up) and at the receiver; counts
// are over the whole run.
type RawResult struct {
	// Backend is "xsk" (our socket layer) or "asavie" (github.com/asavie/xdp).
	Backend string `json:"backend"`
	// FrameSize is the Ethernet frame length of the rate run, bytes.
	FrameSize int `json:"frame_size"`
	// MTU is the IP MTU of the run; MultiBuffer reports frames sent and
	// received as descriptor chains (XDP_USE_SG), Chain their length.
	MTU         int  `json:"mtu"`
	MultiBuffer bool `json:"multi_buffer"`
	Chain       int  `json:"chain,omitempty"`
	// Seconds is the measurement window.
	Seconds float64 `json:"seconds"`
	// PPS is verified frames received at B per second.
	PPS float64 `json:"pps"`
	// Gbps is the UDP payload bits of those frames per second: what a
	// transport could carry in them, headers excluded.
	Gbps float64 `json:"gbps"`
	// FrameGbps counts the whole Ethernet frames instead.
	FrameGbps float64 `json:"frame_gbps"`
	// SentPPS is frames A's socket took per second in the window.
	SentPPS float64 `json:"sent_pps"`
	// SenderCPUNsPerFrame is the blasting thread's CPU time in the window
	// per frame sent, and SenderKernelShare the part of it in the kernel
	// (internal/threadcpu): on copy-mode veth its transmit call runs the
	// receiving side's path too, so this is what a frame costs the
	// sending core whatever runs above the socket. SinkCPUNsPerFrame and
	// SinkKernelShare are the receiving thread's per frame received.
	// Zero when the threads' CPU could not be read.
	SenderCPUNsPerFrame float64 `json:"sender_cpu_ns_per_frame,omitempty"`
	SenderKernelShare   float64 `json:"sender_kernel_share,omitempty"`
	SinkCPUNsPerFrame   float64 `json:"sink_cpu_ns_per_frame,omitempty"`
	SinkKernelShare     float64 `json:"sink_kernel_share,omitempty"`
	// Sent, Received and Lost count frames over the whole run, after the
	// drain: Lost = Sent - Received.
	Sent     uint64 `json:"sent"`
	Received uint64 `json:"received"`
	Lost     uint64 `json:"lost"`
	// LossRate is Lost/Sent.
	LossRate float64 `json:"loss_rate"`
	// SinkDrops are the receiving socket's kernel counters
	// (XDP_STATISTICS): frames dropped for an empty fill ring, a full RX
	// ring, or other reasons. The rest of Lost was dropped on the way.
	SinkDrops uint64 `json:"sink_drops"`
	// Redirected is how many frames B's XDP program handed to B's socket
	// during the rate run (loss before it: on the wire, in the switch).
	Redirected uint64 `json:"redirected"`
	// SeqOK reports that every frame B received verified (see ErrSequence);
	// BadFrames and Reordered count those that did not.
	SeqOK     bool   `json:"seq_ok"`
	BadFrames uint64 `json:"bad_frames"`
	Reordered uint64 `json:"reordered"`

	// The latency run: RoundTrips probes answered, LatLost unanswered
	// within 100 ms; percentiles of the answered ones, microseconds.
	ProbeSize  int     `json:"probe_size,omitempty"`
	RoundTrips int     `json:"round_trips"`
	LatLost    int     `json:"lat_lost"`
	LatP50     float64 `json:"lat_p50_us"`
	LatP99     float64 `json:"lat_p99_us"`
	LatMin     float64 `json:"lat_min_us"`
	LatMax     float64 `json:"lat_max_us"`

	// Pinned reports that sender and receiver threads ran pinned to the two
	// CPUs in CPUs; otherwise the scheduler placed them.
	Pinned bool  `json:"pinned"`
	CPUs   []int `json:"cpus,omitempty"`
	// XDPMode is how the XDP program attached on both hosts ("native",
	// "generic"); Bind is the AF_XDP bind mode ("copy", "zerocopy").
	XDPMode string `json:"xdp_mode"`
	Bind    string `json:"bind"`
	// TxSkbBudget is the XDP_MAX_TX_SKB_BUDGET in force, 0 if refused.
	TxSkbBudget uint32 `json:"tx_skb_budget"`
	// IPv6 reports the address family.
	IPv6  bool     `json:"ipv6"`
	Notes []string `json:"notes,omitempty"`
}

// TCPOptions configures TCP. The zero value is valid.
type TCPOptions struct {
	// Duration is the length of the measurement, after a warm-up of a
	// tenth of it (at most 200 ms). Default DefaultDuration.
	Duration time.Duration
	// Streams is the number of parallel connections. Default
	// DefaultStreams.
	Streams int
	// Port is the TCP port B listens on. Default 5201.
	Port uint16
	// IPv6 connects over the hosts' IPv6 addresses.
	IPv6 bool
	// NoOffloads turns TSO, GSO and GRO off on every veth of the path
	// (A's, B's, and the switch's ends of both, in a star) before the run,
	// and leaves them off. Otherwise the offloads are left as they are: a
	// new veth has TSO and GSO on and GRO off, unless the Net was built
	// with LinkConfig.NoOffloads.
	NoOffloads bool
	// WriteSize is the size of one write on the sender. Default 128 KiB.
	WriteSize int
	// Connected, if set, runs once every connection is up and before the
	// warm-up: the loss sweep turns the switch's loss on there, so that a
	// lost SYN (whose retry is a second away) does not decide the run.
	Connected func() error
}

func (o TCPOptions) withDefaults() (TCPOptions, error) {
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Streams == 0 {
		o.Streams = DefaultStreams
	}
	if o.Port == 0 {
		o.Port = 5201
	}
	if o.WriteSize == 0 {
		o.WriteSize = 128 << 10
	}
	if o.Duration < 0 || o.Streams < 0 || o.Streams > 64 || o.WriteSize < 0 {
		return o, fmt.Errorf("bench: bad TCP options: duration %v, %d streams (1..64), write size %d",
			o.Duration, o.Streams, o.WriteSize)
	}
	return o, nil
}

// TCPResult is what a TCP run measured.
type TCPResult struct {
	Backend string `json:"backend"` // "tcp"
	// Streams is the number of connections.
	Streams int `json:"streams"`
	// Seconds is the measurement window.
	Seconds float64 `json:"seconds"`
	// Gbps is application bytes received at B per second, in the window.
	Gbps float64 `json:"gbps"`
	// Sent and Received are application bytes over the whole run.
	Sent     uint64 `json:"sent"`
	Received uint64 `json:"received"`
	// Retransmits is the sum of the senders' tcpi_total_retrans: segments
	// sent again (a loss signal, not a loss count).
	Retransmits uint64 `json:"retransmits"`
	// Stalled: the connections moved data (bytes received or segments
	// retransmitted) but delivered nothing in the window, as TCP does
	// while it waits out a backed-off retransmission timeout at high
	// loss. Gbps is then a measured 0, not a failure.
	Stalled bool `json:"stalled,omitempty"`
	// Offloads is the TSO/GSO/GRO state of the path's veths, read back with
	// ethtool -k: "on" or "off" when all three are so on every end,
	// otherwise per feature; a new veth has "tso:on gso:on gro:off" (veth
	// turns GRO on only for XDP). "unknown", with a note, without ethtool.
	Offloads string `json:"offloads"`
	// IPv6 reports the address family.
	IPv6  bool     `json:"ipv6"`
	Notes []string `json:"notes,omitempty"`
}
