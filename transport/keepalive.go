package transport

import "errors"

// Keepalive of idle connections (§4.4, Config.KeepaliveInterval).
//
// A connection with nothing of its own in flight learns nothing of its
// peer: the retransmission timer is not running, and a peer whose host
// died, or whose daemon lost the connection while its ACCEPT was lost
// (§7.3), says nothing. So an established connection that has heard no
// packet of its peer for KeepaliveInterval sends a keepalive PROBE on a
// path with room, and another each interval while it still hears
// nothing; a live peer acknowledges each at once (§4.4), a peer that
// forgot the connection answers RESET (§7.6), and KeepaliveProbes
// unanswered in a row fail the connection with StatusRetryExceeded.
//
// The receive path only stores the arrival time (heard); the timer is
// armed once and, when it fires early because packets came since, moves
// to the last arrival plus the interval. So a busy connection pays one
// store per packet and no heap operation.
type keepalive struct {
	heard      Time   // the latest packet of the peer on the established connection
	deadline   Time   // the keepalive timer (0: not armed)
	unanswered int    // probes sent since heard last moved
	probeAt    Time   // when the latest probe left
	iv         Time   // the interval now in force: KeepaliveInterval less a random jitter
	draws      uint32 // intervals drawn (interval)
}

// interval draws the next keepalive interval: KeepaliveInterval less up to
// a quarter of it, at random each time. Connections opened together (a
// job connecting to all its peers, the 10,000-connection demo) would
// otherwise go idle, and probe, in the same instant every interval: one
// burst of thousands of PROBEs and acks that overflows a receiving ring
// and loses probes of the same connections each time, until they fail
// (50 of 10,000 did, on a loaded host, with the same interval for all).
// The jitter is a hash of the connection's id (itself random) and a count
// of draws, not a draw from the endpoint's generator: a seeded simulation
// stays deterministic, and its other random choices (entropy values,
// initial PSNs) stay what they were without keepalives.
func (c *Conn) interval() Time {
	iv := Time(c.ep.cfg.KeepaliveInterval)
	c.ka.draws++
	x := uint64(c.localID)<<32 | uint64(c.ka.draws)
	// splitmix64's finaliser
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return iv - Time(x%(uint64(iv/4)+1))
}

var errKeepalive = errors.New("metaroce: peer unreachable: keepalive probes unanswered")

// heard records a packet of the peer (ReceivePort, established only).
func (c *Conn) heard(now Time) {
	k := &c.ka
	k.heard = now
	if k.deadline == 0 && c.ep.cfg.KeepaliveInterval > 0 {
		k.iv = c.interval()
		k.deadline = now + k.iv
	}
}

// keepaliveTimer runs when the keepalive timer is due.
func (c *Conn) keepaliveTimer(now Time) {
	k := &c.ka
	cfg := &c.ep.cfg
	iv := k.iv
	if k.unanswered > 0 && k.heard > k.probeAt {
		k.unanswered = 0 // answered
	}
	if k.unanswered == 0 && now-k.heard < iv {
		k.deadline = k.heard + iv // heard from since it was armed
		return
	}
	k.iv = c.interval()
	iv = k.iv
	if s := &c.snd; s.inflight > 0 || s.readsWaiting > 0 || !s.retxQ.empty() {
		// Our own traffic is outstanding: the retransmission timer and
		// its retry limit judge the peer's liveness.
		k.unanswered, k.deadline = 0, now+iv
		return
	}
	if k.unanswered >= cfg.KeepaliveProbes {
		c.ep.stats.KeepaliveFailures++
		c.fail(StatusRetryExceeded, errKeepalive)
		return
	}
	k.unanswered++
	k.probeAt = now
	k.deadline = now + iv
	c.ep.stats.KeepaliveProbes++
	c.snd.keepalive = true // buildKeepalive writes it (recovery.go)
	c.ep.markReady(c)
}
