package congestion

import "time"

// rttTracker is the controller's own view of the RTT: a smoothed value
// (gain 1/8, RFC 6298), the minimum and the latest sample. The transport
// has its own estimator for timers; keeping one here means a controller
// needs nothing but AckSamples.
type rttTracker struct {
	srtt, min, latest time.Duration
	base              time.Duration // cfg.BaseRTT, used before any sample
}

func (r *rttTracker) sample(d, minHint time.Duration) {
	if minHint > 0 && (r.min == 0 || minHint < r.min) {
		r.min = minHint
	}
	if d <= 0 {
		return
	}
	r.latest = d
	if r.srtt == 0 {
		r.srtt = d
	} else {
		r.srtt += (d - r.srtt) / 8
	}
	if r.min == 0 || d < r.min {
		r.min = d
	}
}

// smoothed is srtt, or the configured base RTT before any sample.
func (r *rttTracker) smoothed() time.Duration {
	if r.srtt > 0 {
		return r.srtt
	}
	return r.base
}

// floor is the minimum RTT, or the configured base RTT before any sample.
func (r *rttTracker) floor() time.Duration {
	if r.min > 0 {
		return r.min
	}
	return r.base
}

// rateOf is bytes per rtt as bits per second.
func rateOf(bytes float64, rtt time.Duration) uint64 {
	if rtt <= 0 {
		return 0
	}
	return uint64(bytes * 8 / rtt.Seconds())
}
