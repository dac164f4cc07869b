package transport

// Two round trips come out of every ack (docs/spec.md §5.7, §8.9.1).
//
// The recovery sample, now − EchoTimestamp − AckDelay, is how long the
// sender waited for the ack, less the receiver's hold: the retransmission
// timer, RACK's loss delay and path health rest on it, and on a software
// host it must include the host's own delays (an engine that was
// descheduled for a millisecond still answers a millisecond late, and a
// timer that ignored it would fire spuriously).
//
// The fabric sample, arrival − EchoTimestamp − AckDelay, takes the ack's
// arrival from the link (the XDP program's stamp) instead of the engine's
// clock, and the receiver's AckDelay is measured from its own link's
// arrival stamp: what is left is the time the packets spent between the
// two hosts' links, which is what the congestion controller's delay
// target is about. Swift separates fabric from endpoint delay the same
// way, with NIC timestamps. Where the link gives no arrival (the
// simulator, the in-memory link) the two samples are the same.

// recoverySample is the recovery RTT of an ack received at now echoing ts
// with ackDelay: the wait less the receiver's deliberate hold, which is at
// most its ack timer (Config.AckDelay, the same default at both ends). A
// hold beyond that is host delay (the receiver's engine was busy or
// descheduled while the packet waited in its ring, measured from the XDP
// program's arrival stamp) and stays in the sample: the next ack can be as
// late, and a timer that left it out fired spuriously (hundreds of
// timeouts a second on the demo's star, every retransmission a duplicate).
func (c *Conn) recoverySample(now Time, ts uint64, ackDelay uint32) Duration {
	return Duration(now-Time(ts)) - min(Duration(ackDelay), c.ep.cfg.AckDelay)
}

// fabricRTT is the fabric sample's minimum and the smoothed host delay
// (the recovery sample less the fabric sample plus AckDelay: the
// receiver's hold and the sender's own receive wait).
type fabricRTT struct {
	min, latest Duration
	host        Duration // smoothed host delay, 1/8 gain
	have        bool
}

// fabricSample is the fabric RTT of an ack that arrived (by the link's
// stamp) at or before now, echoing ts with ackDelay.
func (c *Conn) fabricSample(now Time, ts uint64, ackDelay uint32) Duration {
	return Duration(c.ep.arrival(now)-Time(ts)) - Duration(ackDelay)
}

// sampleFabric records one ack's samples: rtt the recovery sample, f the
// fabric one.
func (s *sender) sampleFabric(rtt, f Duration) {
	if f <= 0 || rtt <= 0 {
		return
	}
	s.fabric.latest = f
	host := max(rtt-f, 0)
	if !s.fabric.have {
		s.fabric.min, s.fabric.host, s.fabric.have = f, host, true
		return
	}
	s.fabric.min = min(s.fabric.min, f)
	s.fabric.host += (host - s.fabric.host) / 8
}
