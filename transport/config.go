package transport

import (
	"errors"
	"fmt"
	"time"

	"github.com/metaroce/metaroce/congestion"
	"github.com/metaroce/metaroce/wire"
)

// Config tunes an Endpoint. The zero value of a field means "default"
// (see Defaults); Validate resolves defaults and rejects nonsense once, so
// the engine never re-checks a setting on the hot path.
type Config struct {
	// Mode is the transport mode: ModeMetaRoCE (spraying, selective
	// repeat, repathing) or ModeRoCEv2, our own baseline of the classic
	// transport: one path per connection, go-back-N, no repathing (§8.8).
	Mode Mode
	// Congestion names the congestion controller (congestion.Names):
	// "metaroce" (the default), "receiver-hint", "dcqcn" or "none" (the
	// send window alone).
	Congestion string
	// LineRateBps, BaseRTT and InitialWindow (bytes) seed the controller.
	// LineRateBps is also the downlink the receiver shares out in its
	// rate hints.
	LineRateBps   uint64
	BaseRTT       Duration
	InitialWindow int
	// TargetQueue is the queueing delay the metaroce controller allows
	// above the base RTT before it cuts: the delay target is the
	// smaller of the measured minimum RTT and BaseRTT, plus TargetQueue
	// (plus flow scaling). Software timestamps put the host's own delays
	// (batching, scheduling) into every sample, so a software dataplane
	// needs more than a NIC-timestamped fabric.
	TargetQueue Duration
	// PacingBurst is how far ahead of its rate the pacer lets a
	// connection send: a token bucket that deep, in time at the pacing
	// rate (docs/spec.md §8.9.4). 0, a packet per interval, where a NIC
	// paces; on a software link, which hands the kernel a batch of
	// packets per system call, enough for a batch at the rates where
	// that call's cost counts, and no more than half of TargetQueue (a
	// burst adds at most its own length of queueing).
	PacingBurst Duration
	// MTU is the IP MTU of the links. The payload per packet is derived
	// from it for the worst case (IPv6): MTU - 40 (IPv6) - 8 (UDP) -
	// 64 (data header) - 4 (CRC32C).
	MTU int
	// Paths is the number of logical paths (entropy values) per connection.
	Paths int
	// Planes groups the paths into fabric planes (path i is on plane
	// i mod Planes): one NIC port, or one independent fabric, each.
	Planes int
	// SuspectLosses: this many losses in a row make a path suspect.
	SuspectLosses int
	// PathTimeoutRTTs: a path holding data with no ack for this many of
	// its RTTs (plus AckDelay, at least MinPathTimeout) is suspect, and
	// its outstanding packets are resent elsewhere at once.
	PathTimeoutRTTs float64
	MinPathTimeout  Duration
	// SlowFactor: a path whose RTT stays above this multiple of the
	// median of the active paths is suspect. Zero means the default; a
	// negative value disables the test.
	SlowFactor float64
	// ProbeCount probes decide a suspect path; RestoreProbes answered in
	// a row restore it, else it is retired and replaced.
	ProbeCount, RestoreProbes int
	// MinProbeInterval and MaxProbeInterval bound the probe interval (it
	// is twice the RTT, doubling while fresh entropy keeps failing).
	MinProbeInterval, MaxProbeInterval Duration
	// SendWindow bounds packets in flight per connection (also bounded by
	// the peer's receive window).
	SendWindow int
	// RecvWindow is the receive bitmap size in packets (a power of two,
	// at most 65536), announced to peers as their credit.
	RecvWindow int
	// MsgWindow is the number of messages that may be outstanding per
	// connection and direction (a power of two).
	MsgWindow int
	// RecvQueue is the number of receive buffers a connection can have
	// posted (a power of two).
	RecvQueue int
	// MaxStreams is the number of streams per connection (ids 0..MaxStreams-1).
	MaxStreams int
	// MaxPathID bounds path ids a receiver tracks state for.
	MaxPathID int
	// PathRing bounds unresolved transmissions per path (a power of two,
	// at most 256: the SACK bitmap covers 256 sequence numbers).
	PathRing int
	// AckEvery makes a receiver ack a path after this many packets on it.
	AckEvery int
	// AckDelay makes a receiver ack a path at most this long after the
	// first packet it has not acked yet.
	AckDelay time.Duration
	// ReorderPackets: a hole in a path's sequence counts as a loss once
	// this many later transmissions on that path have been acked.
	ReorderPackets int
	// ReorderFraction: a hole also counts as a loss once it is older than
	// the path RTT plus this fraction of it (RACK-style time threshold).
	ReorderFraction float64
	// InitialRTO, MinRTO, MaxRTO bound the retransmission timeout.
	InitialRTO, MinRTO, MaxRTO time.Duration
	// MaxRetries is the number of consecutive timeouts without progress
	// after which a connection fails.
	MaxRetries int
	// RNRDelay is how long a sender waits after an RNR NACK before
	// resending; RNRRetries bounds the RNR and OUT_OF_WINDOW NACKs one
	// message may draw. A connection made or accepted with
	// RNRRetryForever does not count its RNR NACKs, and backs its waits
	// off from RNRDelay instead (rnr.go).
	RNRDelay   time.Duration
	RNRRetries int
	// ConnectTimeout is the first retransmission interval of CONNECT and
	// DISCONNECT; ConnectRetries bounds them.
	ConnectTimeout time.Duration
	ConnectRetries int
	// KeepaliveInterval is how long an established connection with
	// nothing of its own in flight may hear nothing from its peer before
	// it sends a keepalive PROBE (§4.4), and the spacing of the probes
	// after it; KeepaliveProbes unanswered in a row fail the connection
	// with StatusRetryExceeded. A vanished peer is so noticed within
	// (KeepaliveProbes+1) x KeepaliveInterval of its last packet. Negative:
	// no keepalive (the connection then learns of a vanished peer only
	// when it sends).
	KeepaliveInterval time.Duration
	KeepaliveProbes   int
	// CookieLifetime bounds the age of a handshake cookie.
	CookieLifetime time.Duration
	// ResetRate bounds RESET and REJECT replies per millisecond, so a
	// flood of stray packets cannot be turned into a flood of replies.
	ResetRate int
	// MaxConns bounds connections per endpoint.
	MaxConns int
	// Port is the UDP destination port (§2.2); EntropyMin..EntropyMax is
	// the range of UDP source ports used as path entropy.
	Port                   uint16
	EntropyMin, EntropyMax uint16
	// IDMask and IDTag, when IDMask is nonzero, force the bits IDMask of
	// every local connection id to IDTag: the daemon gives each engine of
	// a multi-queue interface its own tag, so connection ids say which
	// engine owns them.
	IDMask, IDTag uint32
	// RateHint is what the receiver puts in the RateHint field of its
	// acks (§5.1, §8.9): RateHintFair (the default) a max-min fair share
	// of LineRateBps among the connections sending to this endpoint,
	// whenever more than one is; RateHintOff always 0.
	RateHint string
	// Seed seeds connection ids, initial PSNs and entropy values (the
	// cookie secret always comes from crypto/rand). Zero means "use
	// crypto/rand"; the simulator sets it so runs are deterministic.
	Seed uint64
}

// maxPacingBurst bounds PacingBurst: a millisecond's burst is a standing
// queue, not pacing.
const maxPacingBurst = time.Millisecond

// Defaults are the values Validate fills in. Each has its reason:
var Defaults = Config{
	Mode: ModeMetaRoCE,
	// metaroce, as in the simulator and with its constants: the delay
	// loop runs on fabric samples (fabric.go), taken from the link's
	// arrival stamps where it has them (the AF_XDP link's XDP program),
	// so a software host's wake-ups and batching stay out of them
	// (docs/spec.md §8.9.4).
	Congestion:    "metaroce",
	LineRateBps:   100e9,                 // a 100 Gb/s NIC, the commodity AI-cluster port today
	BaseRTT:       10 * time.Microsecond, // one switch hop and two NIC traversals
	InitialWindow: 16 * 1024,             // a few packets: 32 senders x 16 KiB fit any switch buffer
	TargetQueue:   congestion.Defaults.Metaroce.TargetQueue,
	PacingBurst:   0,    // a NIC paces every packet; a software host bursts (control/config)
	MTU:           1500, // what a commodity Ethernet fabric runs unless told otherwise
	// 16 paths: on an 8-way ECMP stage each uplink is left unused with
	// probability (7/8)^16 ~ 0.12 and about 2 entropy values share one;
	// more paths spread better but each sees fewer packets per RTT for
	// its own loss detection (32 at a send window of 512). 16 is the
	// balance; raise it for wide stages.
	Paths:            16,
	Planes:           1,                     // one NIC port
	SuspectLosses:    3,                     // 3 in a row is ~1e-6 under 1% random loss: the path, not chance
	PathTimeoutRTTs:  3,                     // 3 RTTs of other paths' acks overtaking it: not queueing, a dead route
	MinPathTimeout:   10 * time.Microsecond, // a floor for tiny RTTs; the test is relative
	SlowFactor:       4,                     // queueing doubles an RTT easily; 4x the median is a bad route
	ProbeCount:       3,                     // three tries decide
	RestoreProbes:    2,                     // one answer can be luck on a lossy path; two in a row is not
	MinProbeInterval: 20 * time.Microsecond,
	MaxProbeInterval: 10 * time.Millisecond,  // a dead plane costs K probes per 10 ms
	SendWindow:       512,                    // ~700 KB at MTU 1500: a 100 Gb/s x 50 us bandwidth-delay product
	RecvWindow:       1024,                   // twice the send window, so reordering never stalls the sender
	MsgWindow:        256,                    // a few hundred small messages in flight per connection
	RecvQueue:        256,                    // matches MsgWindow: every message in flight can be a SEND
	MaxStreams:       64,                     // streams are cheap (two words each); 64 covers a rank's peers
	MaxPathID:        1024,                   // path ids up to 4x the 256 paths a sender may use
	PathRing:         64,                     // per-path transmissions in flight; SendWindow/Paths x 2, pow2
	AckEvery:         4,                      // one ack per 4 packets per path: ~1.4% of data bytes at MTU 1500
	AckDelay:         10 * time.Microsecond,  // under a datacenter RTT, so coalescing costs little
	ReorderPackets:   3,                      // the TCP/QUIC packet threshold
	ReorderFraction:  0.25,                   // RACK's reorder window: a quarter of the RTT
	InitialRTO:       time.Millisecond,       // before any RTT sample: ~20 datacenter RTTs
	MinRTO:           200 * time.Microsecond, // guards against RTT samples below queueing jitter
	MaxRTO:           100 * time.Millisecond,
	MaxRetries:       12, // with backoff, ~seconds of silence before declaring the peer dead
	RNRDelay:         20 * time.Microsecond,
	RNRRetries:       1000, // a slow consumer is not an error; an absent one eventually is
	ConnectTimeout:   time.Millisecond,
	ConnectRetries:   10,
	// A second of silence costs a 68-byte probe; four of them mean the
	// peer is gone (TCP's keepalive, scaled from hours to what an RDMA
	// application waits before it wants to know).
	KeepaliveInterval: time.Second,
	KeepaliveProbes:   3,
	CookieLifetime:    10 * time.Second,
	ResetRate:         64,
	MaxConns:          1 << 16,
	Port:              wire.DefaultPort,
	EntropyMin:        49152, // the IANA dynamic range, where ephemeral ports live anyway
	EntropyMax:        65535,
	// Receivers hint fair shares: the hint settles an incast in one or
	// two RTTs, faster than any sender-side loop can (§8.9).
	RateHint: RateHintFair,
}

// Receiver rate hint policies (Config.RateHint).
const (
	RateHintFair = "fair"
	RateHintOff  = "off"
)

// CongestionNone is no congestion control: the send window alone.
const CongestionNone = "none"

// Mode names a transport mode.
type Mode string

const (
	ModeMetaRoCE Mode = "metaroce"
	ModeRoCEv2   Mode = "rocev2"
)

// Header overhead per data packet in the worst case (IPv6).
const overheadV6 = 40 + 8 + wire.DataLen + wire.TrailerLen

// MaxPayload returns the payload bytes per data packet at the configured MTU.
func (c *Config) MaxPayload() int { return c.MTU - overheadV6 }

// maxRNRWait caps the delay an RNR NACK's Info may ask for (§6.3 step 5):
// MaxRTO, or RNRDelay if that is longer. Info can name 71 minutes, and a
// sender that waited that long on one NACK would look dead; RNRRetries,
// not the wait, is what bounds a peer that never posts a buffer (nothing
// does, with RNRRetryForever: rnr.go).
func (c *Config) maxRNRWait() Duration { return max(c.RNRDelay, c.MaxRTO) }

func pow2(v int) bool { return v > 0 && v&(v-1) == 0 }

// Validate fills defaults and checks the configuration.
func (c *Config) Validate() error {
	d := Defaults
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defd := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch c.Mode {
	case "":
		c.Mode = d.Mode
	case ModeMetaRoCE:
	case ModeRoCEv2:
		// One path, as ECMP flow hashing gives a classic RoCE flow.
		if c.Paths > 1 {
			bad("mode rocev2 uses one path per connection, not %d", c.Paths)
		}
		c.Paths = 1
	default:
		bad("mode %q: want %q or %q", c.Mode, ModeMetaRoCE, ModeRoCEv2)
	}
	if c.Congestion == "" {
		c.Congestion = d.Congestion
	}
	if !congestion.Known(c.Congestion) {
		bad("congestion %q: want one of %v", c.Congestion, congestion.Names())
	}
	if c.LineRateBps == 0 {
		c.LineRateBps = d.LineRateBps
	}
	switch c.RateHint {
	case "":
		// The go-back-N baseline is classic RoCE, whose receivers hint
		// nothing (DCQCN ignores the field anyway).
		c.RateHint = d.RateHint
		if c.Mode == ModeRoCEv2 {
			c.RateHint = RateHintOff
		}
	case RateHintFair, RateHintOff:
	default:
		bad("rate hint %q: want %q or %q", c.RateHint, RateHintFair, RateHintOff)
	}
	defd(&c.BaseRTT, d.BaseRTT)
	defd(&c.TargetQueue, d.TargetQueue)
	def(&c.InitialWindow, d.InitialWindow)
	def(&c.MTU, d.MTU)
	def(&c.Paths, d.Paths)
	def(&c.Planes, d.Planes)
	def(&c.SuspectLosses, d.SuspectLosses)
	if c.PathTimeoutRTTs == 0 {
		c.PathTimeoutRTTs = d.PathTimeoutRTTs
	}
	defd(&c.MinPathTimeout, d.MinPathTimeout)
	if c.SlowFactor == 0 {
		c.SlowFactor = d.SlowFactor
	}
	def(&c.ProbeCount, d.ProbeCount)
	def(&c.RestoreProbes, d.RestoreProbes)
	defd(&c.MinProbeInterval, d.MinProbeInterval)
	defd(&c.MaxProbeInterval, d.MaxProbeInterval)
	def(&c.SendWindow, d.SendWindow)
	def(&c.RecvWindow, d.RecvWindow)
	def(&c.MsgWindow, d.MsgWindow)
	def(&c.RecvQueue, d.RecvQueue)
	def(&c.MaxStreams, d.MaxStreams)
	def(&c.MaxPathID, d.MaxPathID)
	def(&c.PathRing, d.PathRing)
	def(&c.AckEvery, d.AckEvery)
	defd(&c.AckDelay, d.AckDelay)
	def(&c.ReorderPackets, d.ReorderPackets)
	if c.ReorderFraction == 0 {
		c.ReorderFraction = d.ReorderFraction
	}
	defd(&c.InitialRTO, d.InitialRTO)
	defd(&c.MinRTO, d.MinRTO)
	defd(&c.MaxRTO, d.MaxRTO)
	def(&c.MaxRetries, d.MaxRetries)
	defd(&c.RNRDelay, d.RNRDelay)
	def(&c.RNRRetries, d.RNRRetries)
	defd(&c.ConnectTimeout, d.ConnectTimeout)
	def(&c.ConnectRetries, d.ConnectRetries)
	defd(&c.KeepaliveInterval, d.KeepaliveInterval)
	def(&c.KeepaliveProbes, d.KeepaliveProbes)
	defd(&c.CookieLifetime, d.CookieLifetime)
	def(&c.ResetRate, d.ResetRate)
	def(&c.MaxConns, d.MaxConns)
	if c.Port == 0 {
		c.Port = d.Port
	}
	if c.EntropyMin == 0 && c.EntropyMax == 0 {
		c.EntropyMin, c.EntropyMax = d.EntropyMin, d.EntropyMax
	}
	if c.MTU < 576 || c.MTU > 9216 {
		bad("mtu %d: want 576..9216", c.MTU)
	} else if c.MaxPayload() < wire.MinMaxPayload {
		bad("mtu %d leaves a payload under %d bytes", c.MTU, wire.MinMaxPayload)
	}
	if c.Paths < 1 || c.Paths > 256 {
		bad("paths %d: want 1..256", c.Paths)
	}
	if c.Planes < 1 || c.Planes > c.Paths || c.Planes > 255 {
		bad("planes %d: want 1..paths", c.Planes)
	}
	if c.SuspectLosses < 1 || c.PathTimeoutRTTs < 1 || c.MinPathTimeout <= 0 || (c.SlowFactor > 0 && c.SlowFactor < 1) {
		bad("path health: suspect losses >= 1, path timeout >= 1 RTT and > 0, slow factor >= 1 (or negative: off)")
	}
	if c.KeepaliveProbes < 1 {
		bad("keepalive probes %d: want >= 1", c.KeepaliveProbes)
	}
	if c.ProbeCount < 1 || c.RestoreProbes < 1 || c.RestoreProbes > c.ProbeCount {
		bad("probes: want 1 <= restore probes %d <= probe count %d", c.RestoreProbes, c.ProbeCount)
	}
	if c.MinProbeInterval <= 0 || c.MaxProbeInterval < c.MinProbeInterval {
		bad("probe interval bounds %v..%v", c.MinProbeInterval, c.MaxProbeInterval)
	}
	if !pow2(c.RecvWindow) || c.RecvWindow > wire.MaxRecvWindow {
		bad("recv window %d: want a power of two up to %d", c.RecvWindow, wire.MaxRecvWindow)
	}
	if c.PacingBurst < 0 || c.PacingBurst > maxPacingBurst {
		bad("pacing burst %v: want 0..%v", c.PacingBurst, maxPacingBurst)
	}
	if c.SendWindow < 1 || c.SendWindow > wire.MaxRecvWindow {
		bad("send window %d: want 1..%d", c.SendWindow, wire.MaxRecvWindow)
	}
	if !pow2(c.MsgWindow) || c.MsgWindow > 1<<15 {
		bad("message window %d: want a power of two up to 32768", c.MsgWindow)
	}
	if !pow2(c.RecvQueue) || c.RecvQueue > 1<<16 {
		bad("receive queue %d: want a power of two up to 65536", c.RecvQueue)
	}
	if c.MaxStreams < 1 || c.MaxStreams > 1<<16 {
		bad("max streams %d: want 1..65536", c.MaxStreams)
	}
	if c.MaxPathID < c.Paths || c.MaxPathID > 1<<16 {
		bad("max path id %d: want paths..65536", c.MaxPathID)
	}
	if !pow2(c.PathRing) || c.PathRing > wire.SackBits {
		bad("path ring %d: want a power of two up to %d", c.PathRing, wire.SackBits)
	}
	if c.AckEvery < 1 || c.AckDelay < 0 {
		bad("ack coalescing %d packets / %v: want >= 1 and >= 0", c.AckEvery, c.AckDelay)
	}
	if c.ReorderPackets < 1 || c.ReorderPackets >= wire.SackBits {
		bad("reorder packets %d: want 1..255", c.ReorderPackets)
	}
	if c.ReorderFraction < 0 || c.ReorderFraction > 4 {
		bad("reorder fraction %v: want 0..4", c.ReorderFraction)
	}
	if c.MinRTO <= 0 || c.MaxRTO < c.MinRTO || c.InitialRTO < c.MinRTO || c.InitialRTO > c.MaxRTO {
		bad("rto bounds initial %v min %v max %v: want 0 < min <= initial <= max", c.InitialRTO, c.MinRTO, c.MaxRTO)
	}
	if c.MaxRetries < 1 || c.RNRRetries < 1 || c.ConnectRetries < 1 {
		bad("retry limits must be >= 1")
	}
	if c.EntropyMin > c.EntropyMax || c.EntropyMin < 1024 {
		bad("entropy range %d..%d: want 1024 <= min <= max", c.EntropyMin, c.EntropyMax)
	}
	return errors.Join(errs...)
}
