package congestion

// hintCC is receiver-hint: while the receiver's fair-share hint is fresh
// the sender paces at it and sizes its window from it, so an N:1 incast
// settles as soon as the receiver has seen the N senders (one RTT) and
// its acks have come back (the second). Without a hint it is metaroce,
// whose state it keeps current underneath.
type hintCC struct {
	metaroce
}

func newHint(cfg Config) *hintCC {
	h := &hintCC{}
	h.init(cfg, "receiver-hint")
	return h
}

func (h *hintCC) OnAck(now Time, s AckSample) {
	h.metaroce.OnAck(now, s)
	if h.liveHint(now) > 0 {
		// Keep the fallback window at the hint's, so losing the hint
		// (an old receiver, lost acks) continues from the fair share
		// rather than from wherever the delay loop last was.
		h.cwnd = h.hintWindow()
	}
}

// hintWindow is hint x srtt x WindowGain in bytes, within the bounds.
func (h *hintCC) hintWindow() float64 {
	w := bdp(h.hint, h.rtt.smoothed()) * h.cfg.Hint.WindowGain
	return min(max(w, h.cfg.MinWindow), float64(h.cfg.MaxWindow))
}

// hintRate is the hinted rate, scaled down by target / RTT while the RTT
// is above the target delay. The receiver's shares add up to (a little
// under) its downlink, so they hold a queue where it is; the scaling
// drains a queue left by the first RTT of an incast (before any hint
// arrived) at the rate it costs in delay, and vanishes once the RTT is
// back under target.
func (h *hintCC) hintRate() uint64 {
	r := float64(h.hint)
	if t, l := h.target(), h.rtt.latest; l > t {
		r *= float64(t) / float64(l)
	}
	if h.cfg.LineRate > 0 {
		r = min(r, float64(h.cfg.LineRate))
	}
	return max(uint64(r), 1)
}

func (h *hintCC) Window() int {
	if h.liveHint(h.now) == 0 {
		return h.metaroce.Window()
	}
	return min(max(int(h.hintWindow()), h.cfg.MSS), h.cfg.MaxWindow)
}

func (h *hintCC) PacingRate() uint64 {
	if h.liveHint(h.now) == 0 {
		return h.metaroce.PacingRate()
	}
	return h.hintRate()
}

func (h *hintCC) State() State {
	s := h.metaroce.State()
	s.Window = h.Window()
	s.PacingRate = h.PacingRate()
	if s.Hint > 0 {
		s.Rate = h.hintRate()
	}
	return s
}
