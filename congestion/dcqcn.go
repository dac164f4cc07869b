package congestion

import "math"

// dcqcn is the reaction point of DCQCN (Zhu et al., "Congestion Control
// for Large-Scale RDMA Deployments", SIGCOMM 2015, §3.1), driven by acks
// instead of CNP packets: an ack with CE-marked bytes stands for a CNP,
// and at most one counts per CNPInterval, as the notification point
// sends at most one CNP per N = 50 us.
//
// The flow starts at line rate. The first CNP activates the state
// machine: on each CNP the target rate takes the current rate, the
// current rate is cut by alpha/2 and alpha moves towards 1. Without CNPs,
// alpha decays every AlphaTimer, and the rate climbs back in stages
// counted by two clocks, the rate timer (T) and the byte counter (B, bytes
// sent): fast recovery (rate halves its distance to the target) for the
// first F events of both clocks, additive increase (the target grows by
// R_AI) once either clock passed F, hyper increase (by i x R_HAI) once
// both have. Timers are evaluated lazily from the now of every call (and
// OnTick), so no goroutine or clock is needed.
//
// DCQCN is rate-based; Window is rate x srtt x WindowRTTs, only a bound
// on what a stale rate can put in flight. Loss is counted, not acted on
// (DCQCN assumes PFC; the rocev2 baseline is ECN-only by definition);
// an RTO, though, counts as a CNP: on a lossy fabric it means the marks
// were lost with the data.
type dcqcn struct {
	cfg Config
	rtt rttTracker
	max float64 // the rate ceiling, bits/s: LineRate, or MaxWindow/BaseRTT

	rc, rt float64 // current and target rate, bits/s
	alpha  float64
	active bool // a CNP has been seen: timers are armed

	lastCNP   Time
	alphaNext Time // the alpha timer's next expiry
	rateNext  Time // the rate timer's next expiry
	timerN    int  // T: rate-timer events since the last CNP
	bytesN    int  // BC: byte-counter events since the last CNP
	sentBytes int  // bytes sent towards the next byte-counter event
	now       Time

	st State
}

func newDCQCN(cfg Config) *dcqcn {
	d := &dcqcn{cfg: cfg, alpha: 1, st: State{LastPath: -1}}
	d.rtt.base = cfg.BaseRTT
	d.max = float64(cfg.LineRate)
	if d.max == 0 {
		d.max = float64(rateOf(float64(cfg.MaxWindow), cfg.BaseRTT))
	}
	d.rc, d.rt = d.max, d.max
	return d
}

// advance runs the timers that expired by now.
func (d *dcqcn) advance(now Time) {
	d.now = max(d.now, now)
	if !d.active {
		return
	}
	q := &d.cfg.DCQCN
	if now >= d.alphaNext {
		k := int64(q.AlphaTimer)
		n := (now-d.alphaNext)/k + 1
		d.alpha *= math.Pow(1-q.G, float64(n))
		d.alphaNext += n * k
	}
	t := int64(q.RateTimer)
	for now >= d.rateNext {
		if d.rc >= d.max && d.rt >= d.max {
			// Fully recovered: further events change nothing but the
			// counters; skip them in one step.
			n := (now-d.rateNext)/t + 1
			d.timerN += int(min(n, 1<<20))
			d.rateNext += n * t
			break
		}
		d.timerN++
		d.increase()
		d.rateNext += t
	}
}

// increase is one rate-increase event of either clock.
func (d *dcqcn) increase() {
	q := &d.cfg.DCQCN
	lo, hi := min(d.timerN, d.bytesN), max(d.timerN, d.bytesN)
	switch {
	case hi < q.F:
		// Fast recovery: the target stays; rc halves its distance.
	case lo > q.F:
		d.rt += float64(lo-q.F) * float64(q.RHAI)
	default:
		d.rt += float64(q.RAI)
	}
	d.rt = min(d.rt, d.max)
	d.rc = min((d.rc+d.rt)/2, d.max)
}

// cnp is the reaction to one congestion notification.
func (d *dcqcn) cnp(now Time) {
	q := &d.cfg.DCQCN
	d.rt = d.rc
	d.rc = max(d.rc*(1-d.alpha/2), float64(q.MinRate))
	d.alpha = (1-q.G)*d.alpha + q.G
	d.active = true
	d.lastCNP = now
	d.timerN, d.bytesN, d.sentBytes = 0, 0, 0
	d.alphaNext = now + int64(q.AlphaTimer)
	d.rateNext = now + int64(q.RateTimer)
	d.st.LastDecrease = now
	d.st.Decreases++
}

func (d *dcqcn) OnSent(now Time, bytes int) {
	d.advance(now)
	if !d.active || bytes <= 0 {
		return
	}
	d.sentBytes += bytes
	for d.sentBytes >= d.cfg.DCQCN.ByteCounter {
		d.sentBytes -= d.cfg.DCQCN.ByteCounter
		d.bytesN++
		d.increase()
	}
}

func (d *dcqcn) OnAck(now Time, s AckSample) {
	d.advance(now)
	d.rtt.sample(s.RTT, s.MinRTT)
	marked := min(max(s.Marked, 0), s.Bytes)
	d.st.Acked += uint64(max(s.Bytes, 0))
	d.st.Marked += uint64(marked)
	d.st.LastMarked, d.st.LastPath = marked, s.Path
	if s.RTT > 0 {
		d.st.LastRTT = s.RTT
	}
	if marked > 0 && (d.st.Decreases == 0 || now-d.lastCNP >= int64(d.cfg.DCQCN.CNPInterval)) {
		d.cnp(now)
	}
}

func (d *dcqcn) OnLoss(now Time, bytes int) {
	d.advance(now)
	d.st.Lost += uint64(max(bytes, 0))
}

func (d *dcqcn) OnTimeout(now Time) {
	d.advance(now)
	d.st.Timeouts++
	d.cnp(now)
}

func (d *dcqcn) OnTick(now Time) { d.advance(now) }

func (d *dcqcn) Window() int {
	w := bdp(uint64(d.rc), d.rtt.smoothed()) * d.cfg.DCQCN.WindowRTTs
	return min(max(int(w), d.cfg.MSS), d.cfg.MaxWindow)
}

func (d *dcqcn) PacingRate() uint64 { return max(uint64(d.rc), 1) }

func (d *dcqcn) State() State {
	s := d.st
	s.Algorithm = "dcqcn"
	s.Window = d.Window()
	s.RawWindow = float64(s.Window)
	s.PacingRate = d.PacingRate()
	s.Rate, s.TargetRate = uint64(d.rc), uint64(d.rt)
	s.SRTT, s.MinRTT = d.rtt.smoothed(), d.rtt.min
	s.Alpha = d.alpha
	return s
}
