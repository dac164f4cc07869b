package transport

import (
	"math/bits"

	"github.com/metaroce/metaroce/wire"
)

// Logical paths (docs/spec.md §8.7, informative: all of this is sender
// local, a receiver only echoes path ids).
//
// A connection owns Paths logical paths. A path is an entropy value (the
// UDP source port its packets carry, which the fabric's ECMP hash maps to
// a route the sender never learns) and what the sender has measured on
// it: packets in flight, smoothed and minimum RTT from the timestamps its
// acks echo, the fraction of its packets that came back CE-marked, its
// recent loss rate, when it was last acked.
//
// Spraying: each packet goes on the cheaper of two paths drawn at random
// from the active ones, excluding the path the previous packet took
// ("power of two choices"). The cost of a path is
//
//	(in flight + 1) x RTT x (1 + 4 x mark fraction + 32 x loss rate)
//
// so a path that queues (RTT up), marks or loses gets less traffic before
// anything fails, and consecutive packets of a message spread out. The
// weights: a 25% marked fraction doubles a path's price, and so does 3%
// loss, the point where resending starts to cost more than the path gives;
// uniform random loss raises every path alike and moves nothing. Two
// random candidates balance about as well as scanning all K paths (the
// maximum load is within log log K of the mean) at O(1) per packet, which
// matters at K = 256.
//
// Health: a path becomes suspect after SuspectLosses losses in a row,
// when it has data outstanding and no ack for PathTimeoutRTTs of its RTT
// (its outstanding packets are then resent on other paths at once), or
// when its RTT stays above SlowFactor times the median of the active
// paths. A suspect path carries no data; it is probed (a PROBE packet,
// acked at once) every probe interval. RestoreProbes answered probes in a
// row restore it; ProbeCount unanswered ones retire it, and a fresh
// entropy value replaces it, which enters as suspect too, so no data
// rides an entropy value before a probe went through. A plane whose
// paths all fail stops carrying data and is only probed, with the probe
// interval doubling up to MaxProbeInterval, so a dead plane costs probes,
// not data. (Precisely: after ProbeCount probes without RestoreProbes
// answered in a row, the path is retired; a path suspected twice for
// slowness is retired at once, since it answers probes but stays slow.)
const (
	pathActive uint8 = iota
	pathSuspect
)

// PathState is a path's health, as reported by Conn.Paths.
type PathState uint8

const (
	PathActive PathState = iota
	PathSuspect
)

func (s PathState) String() string { return [...]string{"active", "suspect"}[s] }

// sendPath is the sender's view of one logical path.
type sendPath struct {
	entropy      uint16
	plane        uint8
	state        uint8
	nextSeq      uint32 // next per-path sequence number
	oldest       uint32 // oldest unresolved sequence number
	largestAcked uint32
	haveAcked    bool
	base         uint32 // first slot of its ring in sender.rings
	mask         uint32
	inflight     int

	srtt, minRTT Duration
	markFrac     float64 // EWMA of the CE-marked fraction of acked packets
	lossRate     float64 // EWMA of losses among resolved transmissions
	lossRun      int     // losses since the last acked transmission
	// sweeps counts expiries of the retransmission timer on this path's
	// transmissions (the oldest PSN's) since its last ack. Not towards
	// suspicion (timeoutSweep says why), but they rank it for
	// retransmissions (rank).
	sweeps       int
	timeoutRun   int  // path timeouts since the last acked transmission
	lastProgress Time // last ack, or when inflight went from 0 to 1

	// Probing, while suspect.
	probeAt       Time // next probe due
	probeInterval Duration
	probesSent    int
	probesOK      int // answered in a row
	retirements   int // in a row, without a restore (backs off probing)
	slowStrikes   int // times suspected for slowness since the last repath

	sent, acked, lost, marked uint64
	repaths                   uint64
	lostMarks                 int // ring entries with lost set
}

// PathInfo is a snapshot of one path for telemetry.
type PathInfo struct {
	ID       int
	Entropy  uint16
	Plane    int
	State    PathState
	InFlight int
	SRTT     Duration
	MinRTT   Duration
	MarkFrac float64
	LossRate float64
	Sent     uint64
	Acked    uint64
	Lost     uint64
	Marked   uint64
	Repaths  uint64
}

// Paths appends a snapshot of c's paths to dst (call on the owner). A
// connection that has closed or failed has none: the endpoint reuses its
// paths for new connections.
func (c *Conn) Paths(dst []PathInfo) []PathInfo {
	for i := range c.snd.paths {
		p := &c.snd.paths[i]
		dst = append(dst, PathInfo{ID: i, Entropy: p.entropy, Plane: int(p.plane),
			State: PathState(p.state), InFlight: p.inflight, SRTT: p.srtt, MinRTT: p.minRTT,
			MarkFrac: p.markFrac, LossRate: p.lossRate, Sent: p.sent, Acked: p.acked,
			Lost: p.lost, Marked: p.marked, Repaths: p.repaths})
	}
	return dst
}

// PathCounts returns how many of c's paths are active and how many it has
// (call on the owner). Constant time, from the active list the sender keeps
// anyway, so telemetry can count path states over every connection without
// walking every path. A closed or failed connection has none.
func (c *Conn) PathCounts() (active, total int) { return len(c.snd.active), len(c.snd.paths) }

func (p *sendPath) full() bool { return p.nextSeq-p.oldest == p.mask+1 }

// room reports whether p can take one more transmission. A full ring
// first gives up the transmissions at its head whose PSN is already
// acknowledged (by CumPSN, or another transmission's SACK): they carry
// nothing the sender waits for, and when their own path's acks never
// come (lost, or out of step after a forged packet, §13) they would hold
// the ring full for good, with nothing in flight to run a timer.
func (s *sender) room(p *sendPath) bool {
	if !p.full() {
		return true
	}
	s.reclaimAcked(p)
	return !p.full()
}

// reclaimAcked resolves, from the head of p's ring, transmissions of
// acknowledged PSNs, without a verdict on the path (neither acked nor
// lost on it: it never said).
func (s *sender) reclaimAcked(p *sendPath) {
	for p.oldest != p.nextSeq {
		t := s.tx(p, p.oldest)
		if t.live {
			if t.probe || !s.psnAcked(t.psn) {
				return
			}
			t.live = false
			p.inflight--
		}
		p.oldest++
	}
}

// psnAcked reports whether psn is acknowledged.
func (s *sender) psnAcked(psn wire.PSN) bool {
	if psn.Before(s.una) {
		return true
	}
	return psn.Before(s.nextPSN) && s.pkts[uint32(psn)&s.pktMask].state == psAcked
}

// tx is transmission seq of path p. The rings live in one slice of the
// sender's, not in the paths, so a sendPath holds no pointer: the path
// array is then allocated without a type bitmap and never scanned by the
// collector, which was a tenth of a lazy all-to-all's CPU.
func (s *sender) tx(p *sendPath, seq uint32) *txRec { return &s.rings[p.base+seq&p.mask] }

// claim takes path p's next sequence and returns it with its ring slot,
// for the caller to fill. A slot still marked lost is overwritten before
// any SACK could prove that loss late, so it leaves the count.
func (s *sender) claim(p *sendPath) (uint32, *txRec) {
	seq := p.nextSeq
	p.nextSeq++
	t := s.tx(p, seq)
	if t.lost {
		p.lostMarks--
	}
	return seq, t
}

// cost is the scheduler's price of one more packet on p.
func (p *sendPath) cost(fallback Duration) float64 {
	rtt := p.srtt
	if rtt == 0 {
		rtt = fallback
	}
	if rtt == 0 {
		rtt = 1
	}
	return float64(p.inflight+1) * float64(rtt) * (1 + 4*p.markFrac + 32*p.lossRate)
}

// rand returns the sender's next pseudo-random number (xorshift64*).
func (s *sender) rand() uint64 {
	s.rng ^= s.rng >> 12
	s.rng ^= s.rng << 25
	s.rng ^= s.rng >> 27
	return s.rng * 2685821657736338717
}

// randN returns a pseudo-random number in [0, n): the high word of the
// draw times n, which depends on the draw's high bits. The draw modulo
// n took its low bits, xorshift64*'s weakest: modulo 16 they favoured
// some paths so much that a connection resent for 25 ms on paths through
// a dead spine while five of its sixteen worked (spec §8.7.3). A
// multiply is also cheaper than a 64-bit division on every packet.
func (s *sender) randN(n int) int {
	hi, _ := bits.Mul64(s.rand(), uint64(n))
	return int(hi)
}

// pickPath chooses the path for the next packet, avoiding avoid (the path
// that lost a retransmitted packet) and the previous packet's path when
// another candidate has room. A retransmission (avoid >= 0) also prefers
// a proven path: one that has been acked and whose latest resolved
// transmission arrived; the paths that lost what it resends, or lost
// anything since their last arrival, are the likeliest to lose it again,
// and a fresh path is a guess. It returns -1 when no path has room.
func (s *sender) pickPath(avoid int) int {
	n := len(s.active)
	if n == 0 {
		return s.pickAny(avoid)
	}
	retx := avoid >= 0
	best, cands := -1, 0
	bestCost := 0.0
	for try := 0; try < 8 && cands < 2; try++ {
		k := int(s.active[s.randN(n)])
		if (n > 1 && k == avoid) || (n > 2 && k == s.lastPath) || k == best {
			continue
		}
		p := &s.paths[k]
		if !s.room(p) || (retx && !p.proven()) {
			continue
		}
		cands++
		if c := p.cost(s.rtt.srtt); best < 0 || c < bestCost {
			best, bestCost = k, c
		}
	}
	if best < 0 {
		// The random draws found no candidate: scan, from a random start
		// so the scan does not favour low path ids. A retransmission
		// takes the best-ranked path with room (see rank).
		off := s.randN(n)
		bestRank := -1
		for i := 0; i < n; i++ {
			k := int(s.active[(off+i)%n])
			p := &s.paths[k]
			if !s.room(p) {
				continue
			}
			// A retransmission takes the best-ranked path, and of
			// equals one other than the previous packet's.
			r := rankFirst
			if retx {
				r = 2 * p.rank(k == avoid, avoid >= 0 && p.plane == s.paths[avoid].plane)
				if k != s.lastPath || n <= 2 {
					r++
				}
			}
			if r > bestRank {
				best, bestRank = k, r
				if r == rankFirst {
					break
				}
			}
		}
		if best < 0 {
			// Every active path is full: wait for acks rather than put
			// data on a suspect path.
			return -1
		}
	}
	s.lastPath = best
	return best
}

// proven reports whether p has been acked, its latest resolved
// transmission arrived, and the retransmission timer has not expired on
// it since its last ack (rank).
func (p *sendPath) proven() bool { return p.acked > 0 && p.lossRun == 0 && p.sweeps == 0 }

// rank orders the paths a retransmission may take: proven (5), acked
// but its latest expired the retransmission timer once (4), untried or
// clean but never acked (3; 2 on the plane of the path that lost this
// PSN), lost its latest or expired the timer twice since its last ack
// (1), the path that lost this very PSN (0).
//
// One expiry is as likely a pause of either host as a dead path, and a
// path that was acked is likelier alive than one never heard from (after
// a plane failed, resends ranked below untried paths went to the dead
// plane's). Two expiries are evidence: ranked as proven, a connection
// with one PSN in flight, its paths proven before a spine failed, resent
// it on three dead ones in turn until its retry limit. Of the guesses,
// another plane is the better: a plane's failure takes all its paths.
func (p *sendPath) rank(lostThis, lostPlane bool) int {
	switch {
	case lostThis:
		return 0
	case p.lossRun > 0 || p.sweeps > 1:
		return 1
	case p.acked == 0 && lostPlane:
		return 2
	case p.acked == 0:
		return 3
	case p.sweeps == 1:
		return 4
	}
	return 5
}

// rankFirst is the scan's score of a path that ends the search (a new
// packet's first path with room, or a proven path other than the
// previous packet's): 2 x the best rank + 1.
const rankFirst = 11

// pickAny is the fallback when no path is active: rather than stall, use
// the suspect path with the fewest losses in a row, on a proven plane
// (§7.9: an unproven plane's address may not be the peer's at all).
func (s *sender) pickAny(avoid int) int {
	best := -1
	for i := range s.paths {
		p := &s.paths[i]
		if !s.proven(p.plane) || !s.room(p) || (i == avoid && len(s.paths) > 1) {
			continue
		}
		if best < 0 || p.lossRun < s.paths[best].lossRun {
			best = i
		}
	}
	if best < 0 && avoid >= 0 && s.proven(s.paths[avoid].plane) && !s.paths[avoid].full() {
		best = avoid
	}
	if best >= 0 {
		s.lastPath = best
	}
	return best
}

// rebuildActive refreshes the list of active paths after a state change.
func (s *sender) rebuildActive() {
	s.active = s.active[:0]
	for i := range s.paths {
		if s.paths[i].state == pathActive {
			s.active = append(s.active, uint16(i))
		}
	}
}

// Plane health (§8.7.4): a plane is down when every path on it is suspect,
// up again when one of its paths is restored. The sender keeps, per
// plane, how many of its paths are active; planeHealth runs after every
// path transition.

// planeHealth recounts the active paths per plane, notes the planes that
// went down or came back, and, for a plane that came back, has every other
// path on it probed now, from a fresh probe interval: the plane answers
// again, so its paths are likely alive, and waiting out each one's
// backed-off interval (up to MaxProbeInterval) would keep the plane's
// capacity idle that long.
func (c *Conn) planeHealth(now Time) {
	s := &c.snd
	var active, total [MaxPlanes]uint16
	for i := range s.paths {
		p := &s.paths[i]
		if int(p.plane) >= MaxPlanes {
			continue
		}
		total[p.plane]++
		if p.state == pathActive {
			active[p.plane]++
		}
	}
	for pl := range MaxPlanes {
		if total[pl] == 0 {
			continue
		}
		down := active[pl] == 0
		if down == s.planeDown[pl] {
			continue
		}
		s.planeDown[pl] = down
		if down {
			s.planeDownAt[pl] = now
			c.ep.stats.PlanesDown++
			continue
		}
		if s.planeUnproven[pl] {
			c.planeProven(uint8(pl)) // its first path restored: never down, so not "up"
		} else {
			c.ep.stats.PlanesUp++
		}
		for i := range s.paths {
			p := &s.paths[i]
			if int(p.plane) == pl && p.state == pathSuspect {
				p.retirements, p.probesSent = 0, 0
				p.probeInterval = c.probeInterval()
				p.probeAt = now
			}
		}
		// Only an ack restores a path, and the receive path reschedules
		// the connection after it: the health loop then runs at once.
		if s.pathTimer == 0 || s.pathTimer > now {
			s.pathTimer = now
		}
	}
}

// healthOn reports whether paths are judged at all: with one path there is
// nowhere else to go, and the rocev2 baseline never repaths.
func (c *Conn) healthOn() bool {
	return len(c.snd.paths) > 1 && c.ep.cfg.Mode != ModeRoCEv2
}

// pathAcked records an acknowledged transmission on p.
func (c *Conn) pathAcked(p *sendPath, now Time, probe bool) {
	p.acked++
	p.lossRun, p.timeoutRun, p.sweeps = 0, 0, 0
	p.lossRate -= p.lossRate / 16
	p.lastProgress = now
	if p.state == pathSuspect && probe {
		if !c.snd.proven(p.plane) && c.rxPlane != p.plane {
			// An answer from another of the peer's addresses says
			// nothing of the one this plane would send to (§7.9).
			return
		}
		p.probesOK++
		if p.probesOK >= c.ep.cfg.RestoreProbes {
			c.restorePath(p, now)
		}
	}
}

// pathLost records a lost transmission on p.
func (c *Conn) pathLost(p *sendPath, now Time, probe bool) {
	p.lost++
	if c.snd.sweeping {
		return
	}
	p.lossRun++
	p.lossRate += (1 - p.lossRate) / 16
	if probe {
		p.probesOK = 0
		return
	}
	if c.healthOn() && p.state == pathActive && p.lossRun >= c.ep.cfg.SuspectLosses {
		c.suspectPath(p, now)
	}
}

// pathRTT records an RTT sample and the CE marks of an ack for p.
func (p *sendPath) sample(rtt Duration, acked, ce int) {
	if rtt > 0 {
		if p.srtt == 0 {
			p.srtt, p.minRTT = rtt, rtt
		} else {
			p.srtt += (rtt - p.srtt) / 8
			p.minRTT = min(p.minRTT, rtt)
		}
	}
	if acked > 0 {
		f := min(1, float64(ce)/float64(acked))
		p.markFrac += (f - p.markFrac) / 8
		p.marked += uint64(ce)
	}
}

func (c *Conn) suspectPath(p *sendPath, now Time) {
	if p.state == pathSuspect {
		return
	}
	p.state = pathSuspect
	p.probesSent, p.probesOK = 0, 0
	if p.probeInterval == 0 {
		p.probeInterval = c.probeInterval()
	}
	p.probeAt = now
	c.snd.rebuildActive()
	c.ep.stats.PathsSuspected++
	c.planeHealth(now)
}

func (c *Conn) restorePath(p *sendPath, now Time) {
	p.state = pathActive
	p.lossRun, p.lossRate, p.retirements = 0, 0, 0
	p.probeInterval = 0
	c.snd.rebuildActive()
	c.ep.stats.PathsRestored++
	c.planeHealth(now)
}

// retirePath gives p a fresh entropy value; it stays suspect until probes
// answer on the new route.
func (c *Conn) retirePath(p *sendPath, now Time) {
	c.ep.stats.PathsRetired++
	p.repaths++
	p.retirements++
	p.slowStrikes = 0
	p.entropy = c.ep.entropy()
	// Answers to probes sent on the old entropy must not vouch for the
	// new one.
	for seq := p.oldest; seq != p.nextSeq; seq++ {
		if t := c.snd.tx(p, seq); t.live && t.probe {
			t.live = false
			p.inflight--
		}
	}
	c.advanceOldest(p)
	p.srtt, p.markFrac, p.lossRate, p.lossRun, p.sweeps = 0, 0, 0, 0, 0
	p.probesSent, p.probesOK = 0, 0
	// Back off when fresh entropy keeps failing: the whole plane may be
	// down, and then probing it is all we should spend on it.
	if p.retirements > 1 {
		p.probeInterval = min(2*p.probeInterval, c.ep.cfg.MaxProbeInterval)
	}
	p.probeAt = now + Time(p.probeInterval)
}

func (c *Conn) probeInterval() Duration {
	return max(2*c.snd.rtt.srtt, c.ep.cfg.MinProbeInterval)
}

// pathTimedOut reports whether p's oldest outstanding transmission is
// overdue. Not an absolute timeout: queueing raises every path's RTT
// together and would trip one; instead a transmission is overdue when a
// transmission sent no earlier than it has been acked on another path
// and it has waited PathTimeoutRTTs of p's RTT (overdue), with p silent
// for at least MinPathTimeout. Packets sent together in a burst and
// queued together come back together; one that stays out three of its
// path's RTTs after its companion returned took a broken route. When no
// path is acked at all, the RTO acts instead.
func (c *Conn) pathTimedOut(p *sendPath, now Time) bool {
	if now-p.lastProgress < Time(c.ep.cfg.MinPathTimeout) || p.oldest == p.nextSeq {
		return false
	}
	t := c.snd.tx(p, p.oldest)
	if !t.live {
		return false
	}
	return c.overdue(p, t, now, Time(c.pathTimeout(p)))
}

// mayTimeOut reports whether p's oldest transmission can become overdue
// with time alone: something sent no earlier than it has been acked.
func (c *Conn) mayTimeOut(p *sendPath) bool {
	if p.oldest == p.nextSeq {
		return false
	}
	t := c.snd.tx(p, p.oldest)
	return t.live && c.snd.newestAckedSent >= t.sent
}

// overdue reports whether transmission t of path p has been overtaken
// (§8.7.4). It must have been out for timeout, and something sent at or
// after it must have been acked. Then:
//
//   - if that happened on p's own plane, t is overdue once out longer than
//     the newest transmission acked on the plane took, plus the receiver's
//     ack hold (the hold allowance, §8.7.4): the paths of a plane share its
//     queues, so a burst of queueing delays them alike, but the receiver
//     holds each path's ack up to AckDelay (a software host's engine, busy
//     or descheduled, longer), and once a burst made the round trip longer than
//     timeout (three smoothed RTTs from before it), a packet whose ack was
//     merely held a little longer than its companion's looked overdue;
//   - if only on other planes, once out crossPlaneFactor timeouts: each
//     plane has its own switches, and a burst of queueing on one, while
//     the other planes' acks kept coming, took the whole plane down, many
//     times a run, in demo -topology planes. A dead plane still goes down,
//     a little later.
func (c *Conn) overdue(p *sendPath, t *txRec, now, timeout Time) bool {
	s := &c.snd
	if now-t.sent < timeout || s.newestAckedSent < t.sent {
		return false
	}
	due := t.sent + crossPlaneFactor*timeout
	if pl := int(p.plane); pl < MaxPlanes && s.planeAckedSent[pl] >= t.sent {
		due = t.sent + max(timeout, Time(s.planeAckedRTT[pl]+c.holdAllowance(now)))
	}
	if now < due {
		return false
	}
	// Once the peer's host has been seen to pause, the peer must also
	// have answered since: a receiver descheduled while it held some
	// paths' acks (its coalescing, §5.5) answered others' just before,
	// and every path whose ack it held looked overdue throughout its
	// pause (11 path timeouts in one such pause, each resending all its
	// path held). A peer that answers nothing is the RTO's to judge.
	// Without pauses seen, a silence right after the overtaking ack is
	// a loss at the tail far more often, and waiting for another ack
	// made it slower to repair (a lossy all-to-all's p99 in the
	// simulator: 85 -> 103 us).
	return s.lastAckAt >= due || !c.pausing(now)
}

// holdAllowance is how long the receiver may hold an ack (§8.7.4): at
// least AckDelay, and as long as its acks have shown it to be (a host's
// engine busy or descheduled), up to the RTO, which judges the silence of
// every path at once.
func (c *Conn) holdAllowance(now Time) Duration {
	return max(c.ep.cfg.AckDelay, min(c.snd.hold.get(now), c.snd.rto))
}

// crossPlaneFactor: how many path timeouts a transmission must be out
// when only other planes' acks overtook it (§8.7.4).
const crossPlaneFactor = 2

// pathTimeout is how long p may hold data without an ack.
func (c *Conn) pathTimeout(p *sendPath) Duration {
	rtt := p.srtt
	if rtt == 0 {
		rtt = c.snd.rtt.srtt
	}
	return max(Duration(c.ep.cfg.PathTimeoutRTTs*float64(rtt))+c.ep.cfg.AckDelay, c.ep.cfg.MinPathTimeout)
}

// pathTick runs the slow loop of path health: path timeouts, slow paths,
// probes and retirements. It returns when it next wants to run.
func (c *Conn) pathTick(now Time) Time {
	s := &c.snd
	cfg := &c.ep.cfg
	next := Time(0)
	soon := func(t Time) {
		if next == 0 || t < next {
			next = t
		}
	}
	// The slow loop (§8.9.2): the controller's time-driven state moves
	// on the same tick that re-weights the paths.
	if s.cc != nil {
		s.cc.OnTick(int64(now))
	}
	if !c.healthOn() {
		return 0
	}
	// Median RTT of each plane's active paths, for the slow test. A
	// path is compared with the paths of its own plane: each plane has
	// its own switches and queues, so a plane whose queue runs deeper
	// than another's is slower as a whole, which is capacity still worth
	// using, not a bad route (with one median over both planes, a burst
	// of queueing on one found every path of it slow and took the plane
	// down).
	var med [MaxPlanes]Duration
	if cfg.SlowFactor > 0 && len(s.active) >= 3 {
		// Two passes: count each plane's samples, then lay them out
		// plane by plane in buf (this loop runs every quarter path
		// timeout while data is in flight).
		var buf [256]Duration
		var end [MaxPlanes]int
		for _, k := range s.active {
			if q := &s.paths[k]; q.srtt > 0 && int(q.plane) < MaxPlanes {
				end[q.plane]++
			}
		}
		var at [MaxPlanes]int
		n := 0
		for pl := range end {
			at[pl] = n
			n = min(n+end[pl], len(buf))
			end[pl] = n
		}
		for _, k := range s.active {
			if q := &s.paths[k]; q.srtt > 0 && int(q.plane) < MaxPlanes && at[q.plane] < end[q.plane] {
				buf[at[q.plane]] = q.srtt
				at[q.plane]++
			}
		}
		start := 0
		for pl := range end {
			if end[pl]-start >= 3 {
				med[pl] = median(buf[start:end[pl]])
			}
			start = end[pl]
		}
	}
	for i := range s.paths {
		p := &s.paths[i]
		switch p.state {
		case pathActive:
			if p.inflight > 0 {
				if c.pathTimedOut(p, now) {
					// Packets sent well after this path's oldest
					// outstanding ones have come back on other paths:
					// those are lost. One overdue packet is a loss (a
					// tail with nothing after it on its path); two, or a
					// second timeout in a row, is the path: it is gone
					// for now, and what it still holds is resent.
					c.ep.stats.PathTimeouts++
					n := c.loseOverdue(now, i)
					p.timeoutRun++
					if n >= 2 || p.timeoutRun >= 2 {
						c.loseAllOnPath(now, i)
						c.suspectPath(p, now)
					}
				} else if c.mayTimeOut(p) {
					soon(now + Time(c.pathTimeout(p)/4))
				}
				// Otherwise nothing acked yet was sent after its oldest
				// transmission, so no time passing can make that one
				// overdue: an ack must come first, and an ack that can
				// is for a later transmission, whose sending armed this
				// loop. Polling it meanwhile would wake an idle
				// connection every quarter path timeout for good when
				// the transmission never resolves (its PSN acked on
				// another path, its own path's acks out of step, §13).
			}
			if m := med[min(int(p.plane), MaxPlanes-1)]; m > 0 && p.state == pathActive && p.srtt > Duration(cfg.SlowFactor*float64(m)) {
				c.ep.stats.PathsSlow++
				p.slowStrikes++
				c.suspectPath(p, now)
				if p.slowStrikes >= 2 {
					// It answers probes but stays slow: the route is
					// bad, not broken. Try another.
					c.retirePath(p, now)
				}
			}
		}
		if p.state == pathSuspect {
			if now >= p.probeAt {
				if p.probesSent >= cfg.ProbeCount && p.probesOK < cfg.RestoreProbes {
					c.retirePath(p, now)
				} else {
					s.probesOwed = append(s.probesOwed, uint16(i))
					p.probesSent++
					p.probeAt = now + Time(p.probeInterval)
				}
			}
			soon(p.probeAt)
		}
	}
	if next == 0 && len(s.active) > 0 && s.inflight > 0 {
		soon(now + Time(c.pathTimeout(&s.paths[s.active[0]])))
	}
	return next
}

func median(v []Duration) Duration {
	// insertion sort: at most 256 values, on the slow loop only
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && v[j] < v[j-1]; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
	return v[len(v)/2]
}

// loseOverdue declares lost the overdue transmissions of path pi (see
// overdue) and returns how many.
func (c *Conn) loseOverdue(now Time, pi int) int {
	p := &c.snd.paths[pi]
	timeout := Time(c.pathTimeout(p))
	n := 0
	for seq := p.oldest; seq != p.nextSeq; seq++ {
		t := c.snd.tx(p, seq)
		if !t.live {
			continue
		}
		if !c.overdue(p, t, now, timeout) {
			break // sent in order: the rest are younger
		}
		c.loseTransmission(now, pi, seq)
		n++
	}
	c.advanceOldest(p)
	return n
}

// loseAllOnPath declares every unresolved transmission of path pi lost.
func (c *Conn) loseAllOnPath(now Time, pi int) {
	p := &c.snd.paths[pi]
	for seq := p.oldest; seq != p.nextSeq; seq++ {
		if c.snd.tx(p, seq).live {
			c.loseTransmission(now, pi, seq)
		}
	}
	c.advanceOldest(p)
}

// buildProbe writes a PROBE for a suspect path, if one is owed.
func (c *Conn) buildProbe(now Time, buf []byte) (int, int) {
	s := &c.snd
	for len(s.probesOwed) > 0 {
		pi := int(s.probesOwed[0])
		s.probesOwed = s.probesOwed[1:]
		p := &s.paths[pi]
		if p.state != pathSuspect || !s.room(p) {
			continue
		}
		return c.putProbe(now, buf, pi, false), pi
	}
	s.probesOwed = s.probesOwed[:0]
	return 0, 0
}

// buildHandshakeProbe writes the acceptor's handshake PROBE (§8.4): on
// path 0's sequence but sent with the connection's control entropy, the
// ACCEPT's, so it follows the ACCEPT and arrives after it. It measures
// the connection's round trip, not path 0: its fate is kept out of the
// path's health and RTT.
func (c *Conn) buildHandshakeProbe(now Time, buf []byte) int {
	s := &c.snd
	p := &s.paths[0]
	if !s.room(p) {
		return 0
	}
	return c.putProbe(now, buf, 0, true)
}

// putProbe writes a PROBE on path pi's next sequence into buf. The
// handshake probe (hs) counts as a probe sent but not as a transmission
// of the path.
func (c *Conn) putProbe(now Time, buf []byte, pi int, hs bool) int {
	s := &c.snd
	p := &s.paths[pi]
	seq, t := s.claim(p)
	*t = txRec{sent: now, live: true, probe: true, hs: hs}
	p.inflight++
	if !hs {
		p.sent++
	}
	h := wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq, DstConn: c.peerID,
		PathID: uint16(pi), PathSeq: seq, Timestamp: uint64(now)}
	h.Put(buf)
	wire.Seal(buf[:wire.DataLen+wire.TrailerLen])
	c.ep.stats.ProbesSent++
	return wire.DataLen + wire.TrailerLen
}

// txRec is one transmission on a path.
type txRec struct {
	sent  Time
	psn   wire.PSN
	live  bool
	hs    bool // the handshake probe: times the connection, not the path
	probe bool // a PROBE, not data: resolves only the path's health
	// declared lost; a later SACK of it means the loss was spurious
	// (it was only late), which widens the reorder window
	lost bool
}
