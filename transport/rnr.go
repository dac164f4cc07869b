package transport

import (
	"time"

	"github.com/metaroce/metaroce/wire"
)

// Unlimited RNR retries (§6.3 step 5; ConnectOptions.RNRRetryForever,
// InfiniBand's rnr_retry = 7).
//
// By default a message that draws more than RNRRetries RNR NACKs fails
// the connection: at RNRDelay (20 us) apart that is about 0.1 s, less
// than an MPI rank spends computing between two progress calls. A
// connection made or accepted with RNRRetryForever never fails on RNR:
// an RNR NACK proves the peer alive, and a receiver that has not posted a
// buffer yet is a slow consumer, not a dead one. What still ends such a
// connection is what ends any other: MaxRetries retransmission timeouts
// of silence, keepalive probes unanswered, a RESET. OUT_OF_WINDOW keeps
// its bound (counted against RNRRetries as before): it is not the
// application's doing but the transport's windows (a receiver slot held
// by a stalled READ, or a sender ahead of the receiver's PSN window),
// which a live, honest peer always opens, so a refusal without end
// there is a broken peer.
//
// Without a bound the wait must back off, or a receiver stalled for
// seconds would draw a resend of every refused packet each RNRDelay. Per
// message, it runs in rounds: a round opens when the message's probe,
// the PSN whose refusal opened the previous round, is refused again after
// being resent for it (or at the first refusal), and the n-th round's
// wait is the base delay (the NACK's Info, or RNRDelay) doubled n-1 times,
// at most rnrMaxWait. In the first round every refused packet is resent,
// as without the option, so a receiver that was only briefly short costs
// no more than before; from the second on, only the probe is, and the
// message's other refused PSNs are held until the message makes progress
// (a PSN of it acknowledged: the receiver has its buffer now), which
// resends them at once and resets the rounds. So a stalled receiver
// costs one packet per message per rnrMaxWait, and a receiver that posts
// again is served within one rnrMaxWait and a round trip.
//
// rnrMaxWait caps the backoff: 1 ms. About six doublings from RNRDelay's
// 20 us; at the cap an idle receiver costs one packet a millisecond per
// stalled message (a 1500-byte packet at 1 kHz is 12 Mb/s, 0.012% of a
// 100 Gb/s link), and a receiver that posts again waits at most a
// millisecond more, a small fraction of the compute phase that left it
// unposted. MaxRTO (100 ms) would make resuming cost a tenth of a second
// for next to no saving. A NACK whose Info asks for longer than the cap
// gets what it asks, as without the option (§6.3 step 5 bounds it).
const rnrMaxWait = Duration(time.Millisecond)

// rnrMaxRounds saturates a message's round count (a uint8): 31 doublings
// take any base delay the configuration allows past the cap.
const rnrMaxRounds = 32

// rnrHeld is the rnrAt of a PSN held behind its message's probe: no time
// releases it, only the message's progress (rnrProgress).
const rnrHeld = Never

// rnrForeverWait decides when the PSN psn (record r) of message m, just
// refused with RNR on a connection with RNRRetryForever, goes again: now
// plus base doubled for the message's round (rnrBackoff), or never by
// time (rnrHeld: behind the probe).
func (c *Conn) rnrForeverWait(now Time, m *sendMsg, psn wire.PSN, r *pktRec, base Duration) Time {
	// The peer answered: it is there. Unanswered expiries of the
	// retransmission timer (a lost probe, a lost NACK) count against
	// MaxRetries as consecutive ones, and back the timer off; a refusal
	// ends the run as an ack would, or a long stall would add up
	// MaxRetries expiries (a probe lost twice running, one in 10 s at
	// the cap at 1 % loss) into a failure, and a probe lost late in it
	// would wait out a backed-off timer (TestRNRForeverLossyStall).
	s := &c.snd
	s.timeouts = 0
	s.rto = c.rtoNow(now)
	if m.rnrRounds == 0 || psn == m.rnrProbe && r.sent > m.rnrRound {
		m.rnrRounds = min(m.rnrRounds+1, rnrMaxRounds)
		m.rnrProbe, m.rnrRound = psn, now
	}
	if psn != m.rnrProbe && m.rnrRounds > 1 {
		m.rnrHeld++
		return rnrHeld
	}
	return now + Time(rnrBackoff(base, m.rnrRounds))
}

// rnrBackoff is the wait of a message's rounds-th round of refusals:
// base doubled rounds-1 times, at most rnrMaxWait (or base, if that is
// longer).
func rnrBackoff(base Duration, rounds uint8) Duration {
	limit := max(base, rnrMaxWait)
	d := base
	for i := uint8(1); i < rounds && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// rnrProgress runs when a PSN of message m (slot idx), refused with RNR
// before, is acknowledged: its receiver has the buffer, so the rounds
// start over and the PSNs held behind the probe go now.
func (c *Conn) rnrProgress(idx uint32, m *sendMsg) {
	s := &c.snd
	m.rnrRounds = 0
	for psn := s.una; psn != s.nextPSN && m.rnrHeld > 0; psn++ {
		r := &s.pkts[uint32(psn)&s.pktMask]
		if r.state == psRNR && r.msg == idx && r.rnrAt == rnrHeld {
			m.rnrHeld--
			r.state = psLost
			s.rnrWaiting--
			s.retxQ.push(uint32(psn))
		}
	}
}
