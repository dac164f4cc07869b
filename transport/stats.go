package transport

import "github.com/metaroce/metaroce/wire"

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

	DataSent, DataRetransmitted, DataReceived uint64
	BytesPlaced                               uint64
	Duplicates                                uint64
	OutOfWindow                               uint64
	AcksSent, AcksReceived                    uint64
	NacksSent, NacksReceived                  [8]uint64 // by wire.NackReason
	LostDetected                              uint64    // losses found from a path's SACK
	Timeouts                                  uint64    // RTO expiries
	TailProbes                                uint64    // tail loss probes sent (§8.4)
	SpuriousRetx                              uint64    // retransmissions of data already received
	RNRWaits                                  uint64
	VoidSent, VoidReceived                    uint64 // PSNs abandoned after a failing NACK (§6.3)
	PathsSuspected, PathsRestored             uint64
	PathsRetired                              uint64 // entropy values replaced (repaths)
	PathTimeouts, PathsSlow                   uint64
	ProbesSent, ProbesReceived                uint64
	SequenceNacks                             uint64 // go-back-N receivers (rocev2 mode)
	OutOfOrderDropped                         uint64 // dropped by a go-back-N receiver
	ChallengesSent, ResetsSent, RejectsSent   uint64
	ReplyRateLimited                          uint64
	ConnsAccepted, ConnsFailed, ConnsClosed   uint64
	MessagesCompleted, MessagesFailed         uint64
	RecvCompleted                             uint64
}
