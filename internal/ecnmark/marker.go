package ecnmark

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Config shapes a port.
type Config struct {
	// RateBps is the port's rate in bits per second (1 kb/s to 100 Gb/s).
	RateBps uint64
	// ECNBytes is the marking threshold: an ECN-capable packet that finds
	// more than this many bytes queued leaves with CE.
	ECNBytes int
	// LimitBytes is the buffer: a packet that would take the queue above
	// it is dropped. At least ECNBytes and at least one 64 KB GSO skb's
	// worth is sensible; Validate only requires ECNBytes < LimitBytes.
	LimitBytes int
}

// maxRateBps bounds the rate so that a second of idle time times the rate
// in bytes fits in 64 bits in the program (1e9 ns x 12.5e9 B/s).
const maxRateBps = 100e9

// Validate checks the ranges.
func (c Config) Validate() error {
	switch {
	case c.RateBps < 1000 || c.RateBps > maxRateBps:
		return fmt.Errorf("ecnmark: rate %d b/s: want 1 kb/s to 100 Gb/s", c.RateBps)
	case c.ECNBytes < 0 || c.LimitBytes <= c.ECNBytes:
		return fmt.Errorf("ecnmark: threshold %d B, limit %d B: want 0 <= threshold < limit", c.ECNBytes, c.LimitBytes)
	}
	return nil
}

// HistBuckets is the number of buckets of the backlog histogram.
const HistBuckets = 256

// Counters are the port's counters since it was loaded.
type Counters struct {
	Packets, Bytes uint64
	// Marked is ECN-capable packets that found more than ECNBytes queued
	// and left with CE.
	Marked uint64
	// NotECT is packets that found more than ECNBytes queued but could
	// not be marked (not IP, or not ECN-capable).
	NotECT uint64
	// Dropped is packets that found the buffer full.
	Dropped uint64
	// PeakBytes is the largest virtual backlog; QueueBytes is the
	// backlog after the last packet (not drained to now).
	PeakBytes, QueueBytes uint64
}

// Sub returns c - o, for counting over an interval. PeakBytes and
// QueueBytes are levels, not counts: they are c's.
func (c Counters) Sub(o Counters) Counters {
	return Counters{Packets: c.Packets - o.Packets, Bytes: c.Bytes - o.Bytes, Marked: c.Marked - o.Marked,
		NotECT: c.NotECT - o.NotECT, Dropped: c.Dropped - o.Dropped, PeakBytes: c.PeakBytes, QueueBytes: c.QueueBytes}
}

// Program is the loaded marker with its maps, configured for one port.
type Program struct {
	cfg  Config
	objs markerObjects
	link link.Link
}

// Load loads and configures the program; it is not attached anywhere yet.
func Load(cfg Config) (*Program, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Program{cfg: cfg}
	if err := loadMarkerObjects(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("ecnmark: load: %w", err)
	}
	pc := markerPortConfig{RateBytes: cfg.RateBps / 8, EcnBytes: uint64(cfg.ECNBytes), LimitBytes: uint64(cfg.LimitBytes)}
	if err := p.objs.Config.Put(uint32(0), &pc); err != nil {
		p.objs.Close()
		return nil, fmt.Errorf("ecnmark: configure: %w", err)
	}
	return p, nil
}

// Config returns the port's configuration.
func (p *Program) Config() Config { return p.cfg }

// AttachEgress attaches the program to the tc egress of the interface with
// index ifindex, through a tcx bpf_link: it detaches on Close or when this
// process exits. Interface indexes are per namespace: call it on a thread
// inside the interface's namespace.
func (p *Program) AttachEgress(ifindex int) error {
	if p.link != nil {
		return errors.New("ecnmark: already attached")
	}
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: p.objs.EcnMark, Attach: ebpf.AttachTCXEgress})
	if err != nil {
		return fmt.Errorf("ecnmark: attach to tc egress of ifindex %d: %w", ifindex, err)
	}
	p.link = l
	return nil
}

// Counters reads the counters (under the program's lock, so they are
// consistent with each other).
func (p *Program) Counters() (Counters, error) {
	var s markerPortState
	if err := p.objs.State.LookupWithFlags(uint32(0), &s, ebpf.LookupLock); err != nil {
		return Counters{}, fmt.Errorf("ecnmark: read counters: %w", err)
	}
	return Counters{Packets: s.Packets, Bytes: s.Bytes, Marked: s.Marked, NotECT: s.NotEct,
		Dropped: s.Dropped, PeakBytes: s.PeakBytes, QueueBytes: s.QueueBytes}, nil
}

// Histogram returns the backlog histogram: h[b] counts the packets that
// found a backlog in [b, b+1) x LimitBytes/HistBuckets (dropped ones in the
// buckets at the top).
func (p *Program) Histogram() (Histogram, error) {
	h := Histogram{Width: float64(p.cfg.LimitBytes) / HistBuckets, Counts: make([]uint64, HistBuckets)}
	var per []uint64
	for b := uint32(0); b < HistBuckets; b++ {
		if err := p.objs.BacklogHist.Lookup(b, &per); err != nil {
			return Histogram{}, fmt.Errorf("ecnmark: read histogram: %w", err)
		}
		for _, v := range per {
			h.Counts[b] += v
		}
	}
	return h, nil
}

// Reset zeroes the counters, the histogram and the virtual queue (for a
// port reused by successive runs; call it while no traffic flows).
func (p *Program) Reset() error {
	if err := p.objs.State.Update(uint32(0), &markerPortState{}, ebpf.UpdateLock); err != nil {
		return fmt.Errorf("ecnmark: reset: %w", err)
	}
	zero := make([]uint64, ebpf.MustPossibleCPU())
	for b := uint32(0); b < HistBuckets; b++ {
		if err := p.objs.BacklogHist.Put(b, zero); err != nil {
			return fmt.Errorf("ecnmark: reset histogram: %w", err)
		}
	}
	return nil
}

// Close detaches the program (if attached) and frees it and its maps.
func (p *Program) Close() error {
	var err error
	if p.link != nil {
		err = p.link.Close()
		p.link = nil
	}
	return errors.Join(err, p.objs.Close())
}

// Histogram is a backlog distribution in linear buckets of Width bytes.
type Histogram struct {
	Width  float64
	Counts []uint64
}

// Sub returns h - o, bucket by bucket (o from an earlier reading).
func (h Histogram) Sub(o Histogram) Histogram {
	r := Histogram{Width: h.Width, Counts: make([]uint64, len(h.Counts))}
	for i := range h.Counts {
		r.Counts[i] = h.Counts[i]
		if i < len(o.Counts) {
			r.Counts[i] -= o.Counts[i]
		}
	}
	return r
}

// Total is the number of packets counted.
func (h Histogram) Total() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Quantile returns the upper edge of the bucket holding quantile q (0 to
// 1) of the packets, in bytes: at most Width above the true backlog. It
// returns 0 when the histogram is empty.
func (h Histogram) Quantile(q float64) float64 {
	n := h.Total()
	if n == 0 {
		return 0
	}
	// The smallest bucket whose cumulative count reaches ceil(q*n).
	want := uint64(q*float64(n) + 0.999999)
	want = max(want, 1)
	var cum uint64
	for i, c := range h.Counts {
		cum += c
		if cum >= want {
			return float64(i+1) * h.Width
		}
	}
	return float64(len(h.Counts)) * h.Width
}
