package congestion

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
)

// FairShare is the receiver's half of receiver-hint: it tracks the senders
// currently sending to one downlink and computes each one's share of it,
// the RateHint its acks carry. A sender is active from its first packet
// until it has been silent for IdleTimeout.
//
// Shares are LineRate x Utilisation split equally among the active
// senders, or, with DemandAware, max-min fair over their recent rates
// (water-filling): a sender using less than its equal share is allotted
// what it uses (times DemandHeadroom, so it can grow), and the rest is
// split among the others. Utilisation below 1 leaves the downlink a little
// idle on purpose, so a queue formed before the hints took hold drains.
//
// Observe is the per-packet path: a lookup in a preallocated open-
// addressing index, two stores, and, once per Interval (or when the set
// of senders changes), a recomputation over at most MaxSenders entries.
// Nothing allocates after NewFairShare. A FairShare belongs to one owner
// (the engine of the receiving endpoint) and is not safe for concurrent
// use.
type FairShare struct {
	cfg  FairShareConfig
	rate float64 // LineRate x Utilisation, bits/s

	ents  []fsEntry // dense, len = active senders, cap = MaxSenders
	index []int32   // open addressing by sender id: position in ents, -1 empty
	shift uint      // 64 - log2(len(index))
	order []int32   // scratch for water-filling, cap MaxSenders

	equal       float64 // rate / active senders
	nextMeasure Time
	started     bool
	dirty       bool // the set of senders changed: reallocate now
	// stale: a sender left and the shares are not yet reallocated. A
	// burst of closes then costs one water-filling, at the next read,
	// not one each.
	stale bool

	stats FairShareStats
}

type fsEntry struct {
	id     uint64
	last   Time    // last packet
	since  Time    // start of its current measurement
	bytes  int64   // bytes since `since`
	demand float64 // bits/s over the last interval; -1 before the first
	share  float64 // bits/s
}

// FairShareConfig configures a FairShare; zero fields take defaults.
type FairShareConfig struct {
	// LineRate is the downlink's rate in bits per second (required).
	LineRate uint64
	// MaxSenders bounds the table (default 1024: a receiver's worth of
	// connections in a large incast; 48 bytes per entry plus 8 bytes
	// of index per entry, 56 KB in all).
	MaxSenders int
	// IdleTimeout: a sender silent this long is no longer active
	// (default 100 us, ten base RTTs: a sender between two messages of
	// one burst stays counted; one that finished stops diluting the
	// others within a few RTTs).
	IdleTimeout time.Duration
	// Interval is how often demands are measured and shares recomputed
	// (default 20 us, two base RTTs: long enough to average a paced
	// sender's packets, short enough to follow a change in a few RTTs).
	Interval time.Duration
	// Utilisation is the fraction of LineRate shared out (default 0.95,
	// HPCC's eta: the 5% left idle drains a standing queue).
	Utilisation float64
	// DemandAware enables max-min water-filling over measured rates.
	DemandAware bool
	// DemandHeadroom multiplies a sender's measured rate into its claim
	// (default 2: an application-limited sender may double its rate per
	// interval before the receiver notices).
	DemandHeadroom float64
	// MinShareFrac is the smallest claim, as a fraction of the equal
	// share (default 1/4: an idle-but-active sender that restarts gets a
	// quarter of its share at once and its full share two intervals
	// later; never zero, which the wire would read as "no hint").
	MinShareFrac float64
}

// FairShareStats are a FairShare's counters.
type FairShareStats struct {
	Active     int    // senders currently active
	Joined     uint64 // senders that became active
	Expired    uint64 // senders that went idle
	Overflows  uint64 // packets from senders the full table could not hold
	Recomputes uint64 // share computations
}

// NewFairShare validates cfg and preallocates the table.
func NewFairShare(cfg FairShareConfig) (*FairShare, error) {
	if cfg.LineRate == 0 {
		return nil, errors.New("fair share: line rate is required")
	}
	if cfg.MaxSenders < 0 || cfg.IdleTimeout < 0 || cfg.Interval < 0 || cfg.Utilisation < 0 ||
		cfg.DemandHeadroom < 0 || cfg.MinShareFrac < 0 {
		return nil, errors.New("fair share: negative setting")
	}
	if cfg.MaxSenders == 0 {
		cfg.MaxSenders = 1024
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 100 * time.Microsecond
	}
	if cfg.Interval == 0 {
		cfg.Interval = 20 * time.Microsecond
	}
	if cfg.Utilisation == 0 {
		cfg.Utilisation = 0.95
	}
	if cfg.DemandHeadroom == 0 {
		cfg.DemandHeadroom = 2
	}
	if cfg.MinShareFrac == 0 {
		cfg.MinShareFrac = 0.25
	}
	if cfg.Utilisation > 1 || cfg.MinShareFrac > 1 || cfg.DemandHeadroom < 1 {
		return nil, fmt.Errorf("fair share: utilisation %g and min share %g want (0, 1], headroom %g >= 1",
			cfg.Utilisation, cfg.MinShareFrac, cfg.DemandHeadroom)
	}
	if cfg.MaxSenders > 1<<20 {
		return nil, fmt.Errorf("fair share: max senders %d above 2^20", cfg.MaxSenders)
	}
	// Index at most half full, so probes stay short.
	size := 1 << bits.Len(uint(2*cfg.MaxSenders-1))
	f := &FairShare{
		cfg:   cfg,
		rate:  float64(cfg.LineRate) * cfg.Utilisation,
		ents:  make([]fsEntry, 0, cfg.MaxSenders),
		index: make([]int32, size),
		shift: uint(64 - bits.TrailingZeros(uint(size))),
		order: make([]int32, 0, cfg.MaxSenders),
	}
	f.equal = f.rate
	for i := range f.index {
		f.index[i] = -1
	}
	return f, nil
}

func (f *FairShare) slot(id uint64) uint64 {
	return (id * 0x9e3779b97f4a7c15) >> f.shift // Fibonacci hashing
}

// find returns id's position in ents, or -1.
func (f *FairShare) find(id uint64) int {
	mask := uint64(len(f.index) - 1)
	for s := f.slot(id); ; s = (s + 1) & mask {
		e := f.index[s]
		if e < 0 {
			return -1
		}
		if f.ents[e].id == id {
			return int(e)
		}
	}
}

func (f *FairShare) insertIndex(id uint64, pos int32) {
	mask := uint64(len(f.index) - 1)
	s := f.slot(id)
	for f.index[s] >= 0 {
		s = (s + 1) & mask
	}
	f.index[s] = pos
}

func (f *FairShare) rebuildIndex() {
	for i := range f.index {
		f.index[i] = -1
	}
	for i := range f.ents {
		f.insertIndex(f.ents[i].id, int32(i))
	}
}

// Observe records a packet of bytes from sender at now and returns the
// sender's share in bits per second (the hint for its next ack).
func (f *FairShare) Observe(now Time, sender uint64, bytes int) uint64 {
	if !f.started {
		f.started = true
		f.nextMeasure = now + int64(f.cfg.Interval)
	}
	i := f.find(sender)
	if i < 0 {
		if len(f.ents) == cap(f.ents) {
			f.recompute(now, false) // expire first: room may appear
		}
		if len(f.ents) == cap(f.ents) {
			f.stats.Overflows++
			return uint64(f.rate / float64(len(f.ents)+1))
		}
		i = len(f.ents)
		f.ents = append(f.ents, fsEntry{id: sender, since: now, demand: -1})
		f.insertIndex(sender, int32(i))
		f.stats.Joined++
		f.dirty = true
	}
	e := &f.ents[i]
	e.last = now
	e.bytes += int64(bytes)
	if f.dirty || now >= f.nextMeasure {
		f.recompute(now, now >= f.nextMeasure)
		i = f.find(sender) // recompute may have moved it
		e = &f.ents[i]
	} else if f.stale {
		f.allocate()
	}
	return f.shareOf(e)
}

// Share returns sender's current share without recording a packet; 0 if
// the sender is not active.
func (f *FairShare) Share(sender uint64) uint64 {
	i := f.find(sender)
	if i < 0 {
		return 0
	}
	if f.stale {
		f.allocate()
	}
	return f.shareOf(&f.ents[i])
}

// Remove forgets sender at once (its connection closed).
func (f *FairShare) Remove(sender uint64) {
	i := f.find(sender)
	if i < 0 {
		return
	}
	// Unlink it and re-point the entry drop moves into its place: a
	// connection closing costs O(1) probes, not a rebuild of the index
	// (which a lazy all-to-all, closing a connection per write, paid on
	// every close).
	f.deleteIndex(sender)
	last := len(f.ents) - 1
	if i != last {
		f.index[f.slotOf(f.ents[last].id)] = int32(i)
	}
	f.drop(i)
	f.stale = true
}

// slotOf returns the index slot holding id, which must be present.
func (f *FairShare) slotOf(id uint64) uint64 {
	mask := uint64(len(f.index) - 1)
	s := f.slot(id)
	for f.ents[f.index[s]].id != id {
		s = (s + 1) & mask
	}
	return s
}

// deleteIndex removes id, which must be present, from the index by
// backward-shift deletion (linear probing has no tombstones: every entry
// after the hole that could live in it moves up).
func (f *FairShare) deleteIndex(id uint64) {
	mask := uint64(len(f.index) - 1)
	hole := f.slotOf(id)
	for j := (hole + 1) & mask; f.index[j] >= 0; j = (j + 1) & mask {
		home := f.slot(f.ents[f.index[j]].id)
		// The entry at j stays unless the hole lies on its probe path,
		// cyclically in [home, j).
		if (j-home)&mask >= (j-hole)&mask {
			f.index[hole] = f.index[j]
			hole = j
		}
	}
	f.index[hole] = -1
}

// Tick runs the periodic work (expiry, measurement) at now without a
// packet; the receiver's slow loop calls it so idle senders expire.
func (f *FairShare) Tick(now Time) {
	if f.started && now >= f.nextMeasure {
		f.recompute(now, true)
	}
}

// Active returns the number of active senders.
func (f *FairShare) Active() int { return len(f.ents) }

// Stats returns the counters.
func (f *FairShare) Stats() FairShareStats {
	s := f.stats
	s.Active = len(f.ents)
	return s
}

// shareOf is e's hint. With DemandAware it is the water-filled share,
// but never below the equal share: a sender using less than that is not
// the one building the queue, and holding it to twice its recent rate
// would only slow its next burst (a short message would leave at the
// rate of the sender's average instead of at once). The hints may then
// add up to more than the shared rate, by the low-demand senders' unused
// equal shares, for as long as their bursts last; the senders' delay
// and ECN loops absorb that.
func (f *FairShare) shareOf(e *fsEntry) uint64 {
	s := f.equal
	if f.cfg.DemandAware {
		s = max(e.share, f.equal)
	}
	return max(uint64(s), 1)
}

func (f *FairShare) drop(i int) {
	last := len(f.ents) - 1
	f.ents[i] = f.ents[last]
	f.ents = f.ents[:last]
}

// recompute expires idle senders, measures demands when measure is set
// (the interval elapsed) and reallocates.
func (f *FairShare) recompute(now Time, measure bool) {
	f.stats.Recomputes++
	removed := false
	for i := 0; i < len(f.ents); {
		if now-f.ents[i].last > int64(f.cfg.IdleTimeout) {
			f.drop(i)
			f.stats.Expired++
			removed = true
			continue
		}
		i++
	}
	if removed {
		f.rebuildIndex()
	}
	if measure {
		for i := range f.ents {
			e := &f.ents[i]
			if span := now - e.since; span > 0 {
				e.demand = float64(e.bytes) * 8 / (float64(span) / 1e9)
			}
			e.bytes, e.since = 0, now
		}
		f.nextMeasure = now + int64(f.cfg.Interval)
	}
	f.dirty = false
	f.allocate()
}

// allocate computes the equal share and, if DemandAware, the max-min fair
// shares by water-filling over the senders' claims.
func (f *FairShare) allocate() {
	f.stale = false
	n := len(f.ents)
	if n == 0 {
		f.equal = f.rate
		return
	}
	f.equal = f.rate / float64(n)
	if !f.cfg.DemandAware {
		return
	}
	floor := f.equal * f.cfg.MinShareFrac
	f.order = f.order[:0]
	for i := range f.ents {
		e := &f.ents[i]
		if e.demand < 0 {
			e.share = math.Inf(1) // unmeasured: claims everything it can get
		} else {
			e.share = max(e.demand*f.cfg.DemandHeadroom, floor)
		}
		f.order = append(f.order, int32(i))
	}
	// Claims live in share until assigned; sort senders by claim.
	slices.SortFunc(f.order, func(a, b int32) int {
		ca, cb := f.ents[a].share, f.ents[b].share
		switch {
		case ca < cb:
			return -1
		case ca > cb:
			return 1
		}
		return 0
	})
	remaining := f.rate
	for j, i := range f.order {
		level := remaining / float64(n-j)
		if c := f.ents[i].share; c < level {
			remaining -= c
			continue
		}
		// Everyone from here on claims at least the level: they split
		// what is left equally.
		for _, k := range f.order[j:] {
			f.ents[k].share = level
		}
		remaining = 0
		break
	}
	if remaining > 0 {
		// Every claim was met: hand out the rest equally, so the shares
		// always add up to the shared rate.
		extra := remaining / float64(n)
		for i := range f.ents {
			f.ents[i].share += extra
		}
	}
}
