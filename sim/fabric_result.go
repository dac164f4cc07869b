package sim

import (
	"slices"

	"github.com/metaroce/metaroce/wire"
)

// LinkUtil is one link's utilisation over the collective.
type LinkUtil struct {
	Name        string
	Util        float64
	Drops       uint64 // random loss and faults
	QueueDrops  uint64
	Marked      uint64
	QueueP99    int
	Fabric      bool // switch-to-switch (else a host link)
	FaultTarget bool
}

// FabricResult is a fabric scenario's report.
type FabricResult struct {
	Scenario  string  `json:"scenario"`
	Topology  string  `json:"topology"`
	Transport string  `json:"transport"`
	CC        string  `json:"cc"`
	Seed      uint64  `json:"seed"`
	Hosts     int     `json:"hosts"`
	Planes    int     `json:"planes"`
	Radix     int     `json:"radix"`
	Switches  int     `json:"switches"`
	Size      int     `json:"size"`
	Loss      float64 `json:"loss"`

	Connections       int   `json:"connections"`
	Messages          int   `json:"messages"`
	MessagesCompleted int   `json:"messages_completed"`
	MessagesFailed    int   `json:"messages_failed"`
	MessagesLost      int   `json:"messages_lost"`
	BytesDelivered    int64 `json:"bytes_delivered"`
	DuplicateArrivals int   `json:"duplicate_arrivals"`

	// Incomplete: some writes never completed, or failed, by the end of
	// the run. The collective and the message percentiles are then lower
	// bounds (and so are ratios against this run): the collective runs
	// to the stop, and each unfinished write counts as finishing then,
	// or as taking no time if it was never posted.
	Incomplete bool `json:"incomplete,omitempty"`
	// CollectiveUs runs from the first post to the last arrival;
	// IdealUs is the lower bound of idealNs; OverIdeal their ratio.
	CollectiveUs float64 `json:"collective_us"`
	IdealUs      float64 `json:"ideal_us"`
	OverIdeal    float64 `json:"over_ideal"`
	BaseRTTus    float64 `json:"base_rtt_us"`
	SetupUs      float64 `json:"setup_us"`
	FCTP50us     float64 `json:"fct_p50_us"`
	FCTP99us     float64 `json:"fct_p99_us"`
	FCTP999us    float64 `json:"fct_p999_us"`
	FCTMaxUs     float64 `json:"fct_max_us"`
	BgMessages   int     `json:"bg_messages,omitempty"`
	BgFCTP50us   float64 `json:"bg_fct_p50_us,omitempty"`
	BgFCTP99us   float64 `json:"bg_fct_p99_us,omitempty"`

	// Utilisation of the switch-to-switch links over the collective.
	LinkUtilP50 float64 `json:"link_util_p50"`
	LinkUtilP90 float64 `json:"link_util_p90"`
	LinkUtilP99 float64 `json:"link_util_p99"`
	LinkUtilMax float64 `json:"link_util_max"`

	PacketsSent       uint64  `json:"packets_sent"`
	PacketsRetransmit uint64  `json:"packets_retransmitted"`
	Timeouts          uint64  `json:"timeouts"`
	PathsRetired      uint64  `json:"paths_retired"`
	PathTimeouts      uint64  `json:"path_timeouts"`
	ProbesSent        uint64  `json:"probes_sent"`
	AcksSent          uint64  `json:"acks_sent"`
	AckOverhead       float64 `json:"ack_overhead"`   // ack bytes / data bytes on the wire
	ProbeOverhead     float64 `json:"probe_overhead"` // probe bytes / data bytes on the wire
	WireDropped       uint64  `json:"wire_dropped"`   // random loss and faults
	QueueDrops        uint64  `json:"queue_drops"`
	Marked            uint64  `json:"ecn_marked"`

	Fault             string  `json:"fault,omitempty"`
	FaultAtUs         float64 `json:"fault_at_us,omitempty"`
	GoodputBeforeGbps float64 `json:"goodput_before_gbps,omitempty"`
	GoodputAfterGbps  float64 `json:"goodput_after_gbps,omitempty"`

	SimTimeus float64 `json:"sim_time_us"`
	Events    uint64  `json:"events"`
	// Wall-clock figures (they differ run to run; everything else is
	// the same for a seed).
	WallS        float64 `json:"wall_s"`
	EventsPerSec float64 `json:"events_per_s"`
	HeapPerHost  float64 `json:"heap_bytes_per_host"`
	Error        string  `json:"error,omitempty"`

	// For the CSV files and plots.
	FCTs          []float64  `json:"-"` // collective messages, us, sorted
	GoodputSeries []float64  `json:"-"` // Gb/s per bin from the first post
	BinUs         float64    `json:"-"`
	Links         []LinkUtil `json:"-"`
}

// report fills res from the run.
func (r *fabricRun) report(res *FabricResult, start, end Time, series []float64, links []*Link,
	carried0 []uint64, target *Link) {
	res.DuplicateArrivals = r.dupArrivals
	var fct, bound, bg []float64
	var last Time
	for i := range r.ms {
		m := &r.ms[i]
		if m.bg {
			if m.ok {
				bg = append(bg, float64(m.done-m.posted)/1e3)
			}
			continue
		}
		switch {
		case m.ok && m.arrived != 0:
			res.MessagesCompleted++
			res.BytesDelivered += int64(m.size)
			fct = append(fct, float64(m.done-m.posted)/1e3)
			last = max(last, m.arrived, m.done)
			continue
		case m.done == 0:
			res.MessagesLost++
		}
		// Unfinished (lost or failed): at least until the run stopped,
		// or, never posted (a window's turn that never came), at least 0.
		b := 0.0
		if m.posted != 0 {
			b = float64(end-m.posted) / 1e3
		}
		bound = append(bound, b)
	}
	slices.Sort(fct)
	res.FCTs = fct // the CDF plot's: completed writes only
	all := fct
	if len(bound) > 0 {
		res.Incomplete = true
		all = slices.Concat(fct, bound)
		slices.Sort(all)
		last = max(last, end)
	}
	res.FCTP50us, res.FCTP99us = percentile(all, 0.5), percentile(all, 0.99)
	res.FCTP999us = percentile(all, 0.999)
	if len(all) > 0 {
		res.FCTMaxUs = all[len(all)-1]
	}
	res.BgMessages = len(bg)
	res.BgFCTP50us, res.BgFCTP99us = fctStats(bg)
	if last > start {
		res.CollectiveUs = float64(last-start) / 1e3
	}
	span := float64(max(last, end) - start)
	nf := len(r.f.FabricLinks)
	var utils []float64
	for i, l := range links {
		st := &l.Stats
		res.WireDropped += st.Dropped
		res.QueueDrops += st.QueueDrops
		res.Marked += st.Marked
		u := 0.0
		if span > 0 && l.cfg.RateBps > 0 {
			u = float64(st.Carried-uint64(l.Backlog(end))-carried0[i]) * 8 / l.cfg.RateBps / (span / 1e9)
		}
		res.Links = append(res.Links, LinkUtil{Name: r.f.linkName(i), Util: u, Drops: st.Dropped,
			QueueDrops: st.QueueDrops, Marked: st.Marked, QueueP99: min(st.Queue.Quantile(0.99), st.MaxQueueBytes),
			Fabric: i < nf, FaultTarget: l == target && r.cfg.Fault != ""})
		if i < nf {
			utils = append(utils, u)
		}
	}
	slices.Sort(utils)
	res.LinkUtilP50, res.LinkUtilP90 = percentile(utils, 0.5), percentile(utils, 0.9)
	res.LinkUtilP99 = percentile(utils, 0.99)
	if len(utils) > 0 {
		res.LinkUtilMax = utils[len(utils)-1]
	}
	var dataWire float64
	for _, h := range r.f.Hosts {
		st := h.EP.Stats()
		res.PacketsSent += st.DataSent
		res.PacketsRetransmit += st.DataRetransmitted
		res.Timeouts += st.Timeouts
		res.PathsRetired += st.PathsRetired
		res.PathTimeouts += st.PathTimeouts
		res.ProbesSent += st.ProbesSent
		res.AcksSent += st.AcksSent
	}
	// Data packets are full but for each message's last one; the
	// overheads are per byte of data on the wire.
	dataWire = float64(res.PacketsSent)*float64(wire.DataLen+wire.TrailerLen+WireOverhead) + float64(res.BytesDelivered)
	if dataWire > 0 {
		res.AckOverhead = float64(res.AcksSent) * float64(wire.AckLen+wire.TrailerLen+WireOverhead) / dataWire
		res.ProbeOverhead = float64(res.ProbesSent) * float64(wire.DataLen+wire.TrailerLen+WireOverhead) / dataWire
	}
	bin := float64(r.cfg.Bin)
	res.BinUs = bin / 1e3
	if k := int(float64(last-start)/bin) + 1; k < len(series) {
		series = series[:k]
	}
	res.GoodputSeries = series
	if r.cfg.Fault != "" {
		fb := int(float64(r.cfg.FaultAt) / bin)
		mean := func(lo, hi int) float64 {
			lo, hi = max(lo, 0), min(hi, len(series))
			if hi <= lo {
				return 0
			}
			t := 0.0
			for _, v := range series[lo:hi] {
				t += v
			}
			return t / float64(hi-lo)
		}
		res.GoodputBeforeGbps = mean(fb/2, fb)
		res.GoodputAfterGbps = mean(fb+1, len(series)-1)
	}
}

// linkName names link i of FabricLinks followed by HostLinks.
func (f *Fabric) linkName(i int) string {
	if i < len(f.FabricLinks) {
		return f.FabricLinks[i].name
	}
	i -= len(f.FabricLinks)
	return f.HostLinks[i].name
}
