package congestion

import (
	"math"
	"time"
)

// metaroce is the default controller: a window driven by delay (Swift's
// target delay) and by ECN (DCTCP's marked fraction), paced at
// window / srtt x PacingGain. See the package doc for the mechanism.
type metaroce struct {
	cfg  Config
	name string
	rtt  rttTracker

	cwnd     float64 // bytes; MinWindow <= cwnd <= MaxWindow
	ssthresh float64 // after a timeout: grow by slow start below this; 0 none

	// The observation window (DCTCP's): one srtt of acks, after which
	// both signals are judged.
	alpha                     float64 // EWMA of the marked fraction
	epochEnd                  Time
	epochAcked, epochMarked   int
	epochSampled, epochExcess float64 // bytes with an RTT sample; their sum of (RTT-target)/RTT
	lastCut                   Time
	haveCut                   bool
	// congested: the last observation window saw delay above target or
	// CE marks. A loss cuts only beside such a signal (OnLoss).
	congested bool

	hint   uint64 // last nonzero RateHint, bits/s
	hintAt Time
	// now is the latest time any call was handed: Window and PacingRate
	// take no time, so hint expiry is judged at it.
	now Time

	st State // counters and last signals
}

func newMetaroce(cfg Config) *metaroce {
	m := &metaroce{}
	m.init(cfg, "metaroce")
	return m
}

func (m *metaroce) init(cfg Config, name string) {
	m.cfg, m.name = cfg, name
	m.rtt.base = cfg.BaseRTT
	m.cwnd = float64(cfg.InitialWindow)
	// DCTCP starts alpha at 1 (RFC 8257 §3.3 allows 1 as the
	// conservative choice): the first marked RTT halves the window, as
	// a new flow knows nothing of the queue it joins.
	m.alpha = 1
	m.st.LastPath = -1
}

// target is the delay the window aims at: the base RTT plus the allowed
// queueing. The base is the measured minimum RTT, but never above the
// configured BaseRTT: a flow that joins a standing queue measures the
// queue as part of its "minimum" and, with a target that high, would
// never yield to the flows already there (the latecomer problem of
// delay-based control). Swift fixes its target per fabric for the same
// reason. BaseRTT must therefore be the fabric's unloaded RTT (the
// longest path's, if they differ): too low starves long paths.
//
// Flow scaling (Swift §3.5): the target rises as the window shrinks, by
// up to FlowScaleRange at MinFlowScale MSS, to nothing at MaxFlowScale
// MSS, in proportion to 1/sqrt(window). A small flow thus keeps growing
// while a large one sharing its queue cuts, which is what converges
// flows to fair shares within tens of RTTs instead of hundreds, and it
// leaves room for the queue N small flows build by increasing at once.
func (m *metaroce) target() time.Duration {
	t := min(m.rtt.floor(), m.cfg.BaseRTT) + m.cfg.Metaroce.TargetQueue
	if r := m.cfg.Metaroce.FlowScaleRange; r > 0 {
		w := min(max(m.cwnd/float64(m.cfg.MSS), minFlowScale), maxFlowScale)
		a := float64(r) / (1/math.Sqrt(minFlowScale) - 1/math.Sqrt(maxFlowScale))
		t += time.Duration(a * (1/math.Sqrt(w) - 1/math.Sqrt(maxFlowScale)))
	}
	return t
}

// Swift's fs_min_cwnd and fs_max_cwnd: the flow-scaling curve spans
// windows from 0.1 to 100 packets; above 100 a flow's share is large
// enough that the plain target serves it.
const (
	minFlowScale = 0.1
	maxFlowScale = 100
)

func (m *metaroce) canCut(now Time) bool {
	return !m.haveCut || now-m.lastCut >= int64(m.rtt.smoothed())
}

func (m *metaroce) cut(now Time, f float64) {
	m.cwnd = max(m.cwnd*f, m.cfg.MinWindow)
	m.lastCut, m.haveCut = now, true
	m.ssthresh = 0
	m.st.LastDecrease = now
	m.st.Decreases++
}

func (m *metaroce) clock(now Time) { m.now = max(m.now, now) }

func (m *metaroce) OnSent(now Time, bytes int) { m.clock(now) }

func (m *metaroce) OnAck(now Time, s AckSample) {
	m.clock(now)
	m.rtt.sample(s.RTT, s.MinRTT)
	if s.RateHint > 0 {
		m.hint, m.hintAt = s.RateHint, now
	}
	marked := min(max(s.Marked, 0), s.Bytes)
	m.st.Acked += uint64(max(s.Bytes, 0))
	m.st.Marked += uint64(marked)
	m.st.LastMarked, m.st.LastPath = marked, s.Path
	if s.RTT > 0 {
		m.st.LastRTT = s.RTT
	}
	mc := &m.cfg.Metaroce
	target := m.target()

	// Both signals are judged once per observation window of one srtt
	// (DCTCP's window) and answered by at most one cut, so a queue seen
	// by every ack of an RTT is answered once. Judging the window's
	// average rather than the first sample above target matters for
	// fairness: when the first flow to see the queue cuts alone, its cut
	// drains the queue for the others and, a round later, it is first
	// again; phase-locked, it shrinks to nothing. Averaged over a whole
	// RTT, every flow sees the same queue and cuts by the same factor.
	bytes := max(s.Bytes, 0)
	good := bytes - marked
	m.epochAcked += bytes
	m.epochMarked += marked
	if s.RTT > 0 {
		m.epochSampled += float64(bytes)
		if s.RTT > target {
			m.epochExcess += float64(bytes) * float64(s.RTT-target) / float64(s.RTT)
		}
	}
	cut := false
	if m.epochEnd == 0 {
		m.epochEnd = now + int64(m.rtt.smoothed())
	} else if now >= m.epochEnd {
		f := 1.0
		// Delay (Swift): cut in proportion to the excess over target,
		// (RTT - target) / RTT, averaged over the window's bytes.
		if m.epochSampled > 0 && m.epochExcess > 0 {
			f = max(1-mc.Beta*m.epochExcess/m.epochSampled, 1-mc.MaxMD)
		}
		// ECN (DCTCP): alpha is the EWMA of the marked fraction; a
		// window with marks cuts by alpha/2.
		if m.epochAcked > 0 {
			frac := float64(m.epochMarked) / float64(m.epochAcked)
			m.alpha += mc.G * (frac - m.alpha)
			if m.epochMarked > 0 {
				f = min(f, 1-m.alpha/2)
			}
		}
		m.congested = f < 1
		if f < 1 && m.canCut(now) {
			m.cut(now, f)
			cut = true
		}
		m.epochAcked, m.epochMarked, m.epochSampled, m.epochExcess = 0, 0, 0, 0
		m.epochEnd = now + int64(m.rtt.smoothed())
	}

	// A window the sender does not fill (held back by the line rate,
	// the pacer or the application) earns no increase: it would only
	// grow into a burst for later (RFC 7661's rule: grow only while the
	// pipe holds at least half the window).
	used := s.InFlight+bytes >= int(m.cwnd/2)
	if !cut && used && m.rtt.latest < target && good > 0 {
		// Below target: additive increase of AI MSS per RTT, earned only
		// by unmarked bytes. Below one MSS the increase is AI x acked
		// bytes (Swift's cwnd += ai x num_acked below one packet): AI x
		// window per RTT, so N sub-packet flows add about their total
		// window, not N packets, per RTT, which lets a large incast hold
		// the target; the two rules meet at one MSS.
		g := float64(good)
		mss := float64(m.cfg.MSS)
		switch {
		case m.ssthresh > 0 && m.cwnd < m.ssthresh:
			m.cwnd += g // slow start back to half the pre-timeout window
		case m.cwnd >= mss:
			m.cwnd += mc.AI * mss * g / m.cwnd
		default:
			m.cwnd += mc.AI * g
		}
	}
	m.cwnd = min(m.cwnd, float64(m.cfg.MaxWindow))
}

// OnLoss cuts by MaxMD (Swift's max_mdf), at most once per RTT, but only
// when the loss comes with a congestion signal: the latest RTT above
// target, CE marks in the current observation window, or a previous
// window judged congested. A buffer that overflows has first held more
// than the target delay and the marking threshold (both are far below
// any switch buffer), so a congestive drop always has such a signal
// beside it. A loss without one is corruption, a failing link or a
// blackholed path: the transport's path health handles those (it stops
// spraying onto the path), and a window cut would only slow the flow
// down; with 2% random loss, cutting on every loss held a flow to 12
// Gb/s where the link gave 89.
func (m *metaroce) OnLoss(now Time, bytes int) {
	m.clock(now)
	m.st.Lost += uint64(max(bytes, 0))
	congested := m.congested || m.epochMarked > 0 || m.rtt.latest > m.target()
	if bytes > 0 && congested && m.canCut(now) {
		m.cut(now, 1-m.cfg.Metaroce.MaxMD)
	}
}

func (m *metaroce) OnTimeout(now Time) {
	m.clock(now)
	// Nothing came back for an RTO: the window collapses to one packet
	// and slow start returns to half of where it was (TCP's RFC 5681
	// response; Swift resets to its minimum window after repeated RTOs).
	prev := m.cwnd
	m.cut(now, 0)
	m.cwnd = max(float64(m.cfg.MSS), m.cfg.MinWindow)
	m.ssthresh = max(prev/2, m.cwnd)
	m.epochAcked, m.epochMarked, m.epochEnd = 0, 0, 0
	m.epochSampled, m.epochExcess = 0, 0
	m.st.Timeouts++
}

func (m *metaroce) OnTick(now Time) { m.clock(now) }

func (m *metaroce) Window() int {
	return min(max(int(m.cwnd), m.cfg.MSS), m.cfg.MaxWindow)
}

// liveHint is the receiver's hint while it is fresh, else 0.
func (m *metaroce) liveHint(now Time) uint64 {
	if m.hint == 0 {
		return 0
	}
	life := time.Duration(m.cfg.Hint.LifetimeRTTs * float64(m.rtt.smoothed()))
	if now-m.hintAt > int64(life) {
		return 0
	}
	return m.hint
}

func (m *metaroce) PacingRate() uint64 {
	srtt := m.rtt.smoothed()
	var r uint64
	if m.cwnd < float64(m.cfg.MSS) {
		// Below one packet the window is a rate: one MSS every
		// srtt x MSS / cwnd, but at least every MSS / MinWindow base
		// RTTs (100: 1 ms at 10 us). MinWindow promises a flow's packet
		// interval stays within that many RTTs; at the smoothed RTT, a
		// host's delays in it (hundreds of us on shared cores) stretched
		// it to tens of ms, and a 4:1 incast's flows starved at 0.4 Mb/s
		// for seconds behind a 200 Mb/s port.
		r = max(rateOf(m.cwnd, srtt), rateOf(m.cfg.MinWindow, m.cfg.BaseRTT))
	} else {
		r = rateOf(m.cwnd*m.cfg.PacingGain, srtt)
	}
	return m.capRate(r)
}

// capRate caps r at the line rate and at the receiver's hint.
func (m *metaroce) capRate(r uint64) uint64 {
	if m.cfg.LineRate > 0 {
		r = min(r, m.cfg.LineRate)
	}
	if h := m.liveHint(m.now); h > 0 {
		r = min(r, h)
	}
	return max(r, 1)
}

func (m *metaroce) State() State {
	s := m.st
	s.Algorithm = m.name
	s.Window = m.Window()
	s.RawWindow = m.cwnd
	s.PacingRate = m.PacingRate()
	s.Rate = rateOf(m.cwnd, m.rtt.smoothed())
	s.Target = m.target()
	s.SRTT, s.MinRTT = m.rtt.smoothed(), m.rtt.min
	s.Alpha = m.alpha
	s.Hint = m.liveHint(m.now)
	return s
}
