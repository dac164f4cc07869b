package transport

import (
	"math/bits"

	"github.com/metaroce/metaroce/wire"
)

// Stats are an endpoint's counters. Only the goroutine driving the Endpoint
// writes them; readers on other goroutines must get a copy from that owner
// (telemetry/ does this once per scrape), so no field needs to be atomic.
type Stats struct {
	RxPackets, RxBytes uint64
	TxPackets, TxBytes uint64
	// Parse failures by wire.Error reason.
	RxMalformed [wire.NumReasons]uint64
	// Packets for a connection id this endpoint does not have.
	RxUnknownConn uint64
	// Packets whose source address is not the connection's peer.
	RxWrongPeer uint64
	// Packets whose path id is beyond MaxPathID.
	RxBadPath uint64
	// Acks that acknowledge a path sequence never sent.
	RxBogusAck uint64
	// Connection packets that arrived in a state where they mean nothing.
	RxUnexpected uint64
	// RESETs that named a connection but carried the wrong reset token
	// (§7.6): forgeries, or a restarted peer's.
	RxResetBadToken uint64

	DataSent, DataRetransmitted, DataReceived uint64
	BytesPlaced                               uint64
	Duplicates                                uint64
	OutOfWindow                               uint64
	AcksSent, AcksReceived                    uint64
	NacksSent, NacksReceived                  [8]uint64 // by wire.NackReason
	LostDetected                              uint64    // losses found from a path's SACK
	Timeouts                                  uint64    // RTO expiries
	TailProbes                                uint64    // tail loss probes sent (§8.4)
	ResponseTimeouts                          uint64    // RTO expiries with only READ responses awaited (§8.4)
	KeepaliveProbes, KeepaliveFailures        uint64    // keepalive PROBEs of idle connections, and connections they failed
	StreamPositionsLost                       uint64    // stream positions failed as lost to forged PSNs (§9.1)
	SpuriousRetx                              uint64    // retransmissions of data already received
	SpuriousTimeouts                          uint64    // first expiries of a silence that an ack of an older transmission proved a pause, not loss (§8.4)
	RNRWaits                                  uint64
	VoidSent, VoidReceived                    uint64 // PSNs abandoned after a failing NACK (§6.3)
	// HolesRepaired counts holes an ack or NACK proved (PSNs the sender
	// held delivered that the receiver lacks, after a forgery) and the
	// repairs queued for them; RepairVoidsSent the void packets sent
	// (§8.10).
	HolesRepaired, RepairVoidsSent uint64
	PathsSuspected, PathsRestored  uint64
	// PlanesDown and PlanesUp count a connection's planes going down
	// (every path on the plane suspect) and coming back (§8.7.4).
	PlanesDown, PlanesUp uint64
	// PlanesUnproven counts a connection's planes other than plane 0,
	// which start unproven (§7.9), PlanesProven those the peer then
	// answered on; the difference, less connections gone, is the planes
	// whose announced address never answered.
	PlanesUnproven, PlanesProven            uint64
	PathsRetired                            uint64 // entropy values replaced (repaths)
	PathTimeouts, PathsSlow                 uint64
	ProbesSent, ProbesReceived              uint64
	SequenceNacks                           uint64 // go-back-N receivers (rocev2 mode)
	OutOfOrderDropped                       uint64 // dropped by a go-back-N receiver
	ChallengesSent, ResetsSent, RejectsSent uint64
	ReplyRateLimited                        uint64
	ConnRequests                            uint64 // connections held Pending for a deferring listener
	ConnsAccepted, ConnsFailed, ConnsClosed uint64
	MessagesCompleted, MessagesFailed       uint64
	RecvCompleted                           uint64
	// RxCE counts data packets that arrived with a CE mark in their IP
	// header; CEEchoed the CE marks the peers' acks reported back for our
	// data (the sender's view of the same marks).
	RxCE, CEEchoed uint64
	// RTT is the distribution of the RTT samples acks gave, over all
	// connections and paths.
	RTT Histogram
}

// HistogramBuckets is the number of finite buckets of a Histogram: upper
// bounds of 1.024 us doubling up to about 1.07 s, which spans a
// same-rack round trip through a host whose engine had to be woken up
// (~1 ms) and the longest retransmission timeout (MaxRTO 100 ms).
const HistogramBuckets = 21

// histogramBase is the first bucket's upper bound as a shift: 2^10 ns, a
// power of two so a sample finds its bucket with one bits.Len64.
const histogramBase = 10

// Histogram is a distribution of durations in power-of-two buckets, for
// the hot path: Observe is a shift, a leading-zeros count and two adds,
// no allocation and no lock. Like every counter here it has one writer
// (the owner goroutine); readers take a copy from the owner.
type Histogram struct {
	// Counts[i] counts samples of at most BucketBound(i) (and above the
	// bound of i-1); Counts[HistogramBuckets] those above every bound.
	Counts [HistogramBuckets + 1]uint64
	// Sum is the total of the samples in nanoseconds.
	Sum uint64
}

// Observe records d (negative samples count as 0).
func (h *Histogram) Observe(d Duration) {
	ns := uint64(max(d, 0))
	i := 0
	if ns > 0 {
		i = bits.Len64((ns - 1) >> histogramBase)
	}
	h.Counts[min(i, HistogramBuckets)]++
	h.Sum += ns
}

// Count returns the number of samples.
func (h *Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// BucketBound returns bucket i's upper bound (inclusive).
func BucketBound(i int) Duration { return Duration(1) << (histogramBase + i) }
