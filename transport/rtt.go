package transport

import "time"

// Time is an instant in nanoseconds on the owner's monotonic clock (or the
// simulator's virtual clock). The transport only compares and subtracts.
type Time int64

// Duration is a span of time; it is time.Duration so configs read naturally.
type Duration = time.Duration

// Never is the deadline of an endpoint with nothing to wake up for.
const Never Time = 1<<63 - 1

// rttEstimator is RFC 6298's smoothed RTT and variance, with samples taken
// from echoed send timestamps (so retransmissions give valid samples too:
// the echo names the transmission, which Karn's rule could not know).
type rttEstimator struct {
	srtt, rttvar, min, latest Duration
	minRTO, maxRTO            Duration
	have                      bool
	n                         int // samples taken (handshake ones not counted)
	// bound is an upper bound on the RTT from the handshake, for the
	// acceptor, which gets no echo of its own until it has sent data.
	bound Duration
}

func (r *rttEstimator) init(cfg *Config) {
	r.minRTO, r.maxRTO = cfg.MinRTO, cfg.MaxRTO
}

func (r *rttEstimator) sample(d Duration) {
	if d <= 0 {
		return
	}
	r.latest = d
	r.n++
	if !r.have {
		r.srtt, r.rttvar, r.min, r.have = d, d/2, d, true
		return
	}
	if r.min == 0 || d < r.min {
		r.min = d
	}
	// alpha = 1/8, beta = 1/4 (RFC 6298 §2.3).
	diff := r.srtt - d
	if diff < 0 {
		diff = -diff
	}
	r.rttvar += (diff - r.rttvar) / 4
	r.srtt += (d - r.srtt) / 8
}

// sampleHandshake takes a handshake packet's round trip as the first
// sample for the RTO, but not as the minimum: a 68-byte handshake packet
// crosses the fabric faster than a full data packet, and the congestion
// controller's delay target rests on the minimum (§8.4).
func (r *rttEstimator) sampleHandshake(d Duration) {
	if d <= 0 || r.have {
		return
	}
	r.srtt, r.rttvar, r.latest, r.have = d, d/2, d, true
}

// rto is srtt + 4 rttvar, clamped (RFC 6298 §2.3, §2.4). Before the
// first sample it is the initial RTO, or three times the handshake's
// bound when that is less (what a first sample would give).
func (r *rttEstimator) rto(initial Duration) Duration {
	if !r.have {
		if r.bound > 0 {
			return min(max(3*r.bound, r.minRTO), initial)
		}
		return initial
	}
	v := r.srtt + 4*r.rttvar
	return min(max(v, r.minRTO), r.maxRTO)
}

// pto is the tail-loss probe timeout: two smoothed RTTs plus the
// receiver's ack delay (RFC 8985 §7.2), at least MinPathTimeout, at most
// the RTO (§8.4). Not the peer's hold, though the RTO allows for it: a
// probe resends one packet, spuriously at each pause of the peer's engine
// longer than two RTTs (10 to 27 a run from the sender in the star demo
// on a lossless link), but the probe is what recovers a lost tail, and a
// flight's probe timeout widened by the hold took the star's goodput at 1
// to 5% loss from 2.7-3.2 to 1.7-2.2 Gb/s (demo -sweep).
func (c *Conn) pto() Duration {
	s := &c.snd
	if !s.rtt.have {
		return s.rto
	}
	srtt := s.rtt.srtt
	if c.young() {
		srtt = max(srtt, c.ep.dataRTT.srtt) // rtoNow
	}
	return min(max(2*srtt+c.ep.cfg.AckDelay, c.ep.cfg.MinPathTimeout), s.rto)
}

// lossDelay is how long after its transmission a hole that later packets
// overtook counts as lost: the larger of the smoothed and latest RTT plus
// the reorder fraction of it (RACK, RFC 8985 §6.2).
func (r *rttEstimator) lossDelay(frac float64, initial Duration) Duration {
	if !r.have {
		return initial
	}
	base := max(r.srtt, r.latest)
	return base + Duration(float64(base)*frac)
}

// youngSamples is how many RTT samples of its own a connection takes
// before its RTO and tail probe timeout rest on them alone. Before that
// they are at least the endpoint's (dataRTT, smoothed over every
// connection's samples): the connections of an endpoint share its host,
// whose delays (engines descheduled on shared cores, packets queued in
// its own rings) a connection that has carried a packet or two has not
// seen. 10,000 connections with one WRITE each, eight at a time per
// application session, had 4,449 timeouts and 8,971 retransmissions,
// every one spurious, on their handshake sample alone (§8.4).
const youngSamples = 8

// rtoNow is the connection's RTO (§8.4): its own estimator's, while it is
// young at least the endpoint's, plus its pause allowance.
func (c *Conn) rtoNow(now Time) Duration {
	s := &c.snd
	r := s.rtt.rto(c.ep.cfg.InitialRTO)
	if c.young() {
		r = max(r, c.ep.dataRTT.rto(c.ep.cfg.InitialRTO))
	}
	if a := c.hostAllowance(now); a > 0 {
		// On top of the estimator's RTO, not a floor under it: P was
		// measured from its timer's start, but the next pause may begin
		// at any point of the next timer's run (a floor of P alone fired
		// at pauses of P that began later in the run).
		r = max(r, min(r+a, c.ep.cfg.MaxRTO))
	}
	return r
}

// hostAllowance is what the RTO allows for the hosts' pauses (§8.4): the
// pause allowance P, the longest silence the acks proved a pause, or the
// peer's hold, the longest AckDelay its acks reported, if that is more.
// The hold shows a paused peer before any timer has run into one: in the
// star demo a connection whose peer had held acks for 0.9 ms met a 2.5 ms
// pause with an RTO of 0.55 ms, and its second expiry, with no pause
// proven yet, swept 447 packets in flight, every one a duplicate.
func (c *Conn) hostAllowance(now Time) Duration {
	return max(c.snd.pause.get(now), c.snd.hold.get(now))
}

// pausing reports whether the peer's host has been seen to pause (§8.7.4):
// a silence the acks proved a pause, or an ack held more than
// pausingHolds times AckDelay. Coalescing and a busy host's transmit queue
// hold one about AckDelay (10 to 21 us in the simulator's lossy
// all-to-all, at the default 10 us); an engine descheduled on a shared
// core holds its whole receive ring for milliseconds.
func (c *Conn) pausing(now Time) bool {
	return c.snd.pause.get(now) > 0 || c.holding(now)
}

// holding reports whether the peer's acks have shown it holding them more
// than pausingHolds times AckDelay: pausing without the silences, which a
// slow or dead route also makes.
func (c *Conn) holding(now Time) bool {
	return c.snd.hold.get(now) > pausingHolds*c.ep.cfg.AckDelay
}

// pausingHolds: see pausing.
const pausingHolds = 4

// allowanceHalfLife is how fast the pause and hold allowances fade once
// nothing renews them (§8.4, §8.7.4): slowly, as the pauses of a host's
// engines recur for as long as its cores stay shared, and the tail loss
// probe and the per-path scans, not the timers they widen, recover nearly
// every real loss.
const allowanceHalfLife = Duration(time.Second)

// allowance is the longest of some delay seen, halved once per
// allowanceHalfLife since it was last raised.
type allowance struct {
	v  Duration
	at Time
}

// raise makes the allowance d if d is more than it is now.
func (a *allowance) raise(now Time, d Duration) {
	if d > a.get(now) {
		a.v, a.at = d, now
	}
}

// get is the allowance at now.
func (a *allowance) get(now Time) Duration {
	if a.v == 0 || now-a.at < Time(allowanceHalfLife) {
		return a.v // no division on every ack
	}
	k := (now - a.at) / Time(allowanceHalfLife)
	if k >= 32 {
		a.v = 0
		return 0
	}
	a.v >>= k
	a.at += k * Time(allowanceHalfLife)
	return a.v
}

// young reports whether the connection's timers take the endpoint's
// round trips as their floor: it has fewer than youngSamples of its own,
// and the endpoint has some.
func (c *Conn) young() bool { return c.snd.rtt.n < youngSamples && c.ep.dataRTT.have }
