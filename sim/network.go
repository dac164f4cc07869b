package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/transport"
)

// Time is virtual time in nanoseconds.
type Time = transport.Time

// WireOverhead is what each packet adds on the wire beyond the transport
// packet: Ethernet header and FCS (18), preamble and inter-frame gap (20),
// IPv4 (20) and UDP (8).
const WireOverhead = 18 + 20 + 20 + 8

// LinkConfig describes one direction of a link.
type LinkConfig struct {
	// RateBps is the link's rate in bits per second. Zero means the link
	// adds no serialisation of its own (the sending NIC's rate is the
	// only one), as for the direct host-to-host links of two-host
	// scenarios.
	RateBps float64
	// QueueBytes bounds the link's output queue; a packet that does not
	// fit is tail-dropped. Zero means unbounded.
	QueueBytes int
	// ECNBytes marks CE on packets that find at least this much queued
	// ahead of them (DCTCP-style step marking). Zero: no marking.
	ECNBytes     int
	Delay        time.Duration // propagation delay
	Loss         float64       // probability a packet is dropped
	Reorder      float64       // probability a packet is held back
	ReorderDelay time.Duration // the most a held-back packet is delayed
	Dup          float64       // probability a packet is delivered twice
	Corrupt      float64       // probability one bit of a packet is flipped
	// Drop, if set, is asked about every packet before the random
	// impairments: scenario faults such as a blackholed stream or a cut
	// link at a given time. It must not keep pkt.
	Drop func(now Time, pkt []byte) bool
	// Hold, if set, gives every packet carried an extra delay: a host
	// that holds what it sends (its engine descheduled, say), which the
	// transport's timestamps cannot see. It must not keep pkt.
	Hold func(now Time, pkt []byte) time.Duration
}

// LinkStats counts what a link did.
type LinkStats struct {
	Packets, Bytes, Dropped, Reordered, Duplicated, Corrupted uint64
	QueueDrops, Marked                                        uint64
	MaxQueueBytes                                             int
	// Carried counts the bytes, with WireOverhead, that the link put on
	// the wire (after drops): its busy time is Carried x 8 / RateBps.
	Carried uint64
	// Queue is the backlog arriving packets found (rate-limited links).
	Queue QueueHist
}

// Link is one direction of a cable: towards a host, or towards a switch
// (fabric.go), which forwards the packet onto its next link.
type Link struct {
	cfg  LinkConfig
	to   *Host
	sw   *Switch // non-nil: the link ends at this switch, not at to
	busy Time    // when the link finishes sending what is queued
	// down blackholes the link (a cut cable or a dead switch port):
	// every packet offered is counted in Stats.Dropped.
	down bool
	name string // fabric links: "from>to", for the CSV files
	// chain hands a packet to the switch's next link when it is offered
	// here, not when it arrives (a NIC port into its leaf). The next
	// link then sees packets in the order they were offered to this
	// one, which can differ from their arrival order by less than one
	// packet's serialisation (a small ack offered just after a large
	// packet arrives first), and a fault starting while a packet is on
	// this link applies at the next link by the offer time. Both are
	// below a microsecond; the event saved is one in five or six.
	chain bool
	Stats LinkStats
}

// Name is the link's name in a fabric ("p0-leaf3>p0-spine1"); empty
// elsewhere.
func (l *Link) Name() string { return l.name }

// Route picks the link a packet takes towards one destination. A plain
// *Link is a route to itself; ECMP picks by hashing the entropy.
type Route interface {
	Pick(d transport.Datagram, from *Host) *Link
}

// Pick implements Route for a single link.
func (l *Link) Pick(transport.Datagram, *Host) *Link { return l }

// Backlog returns the bytes queued on l at time t.
func (l *Link) Backlog(t Time) int {
	if l.cfg.RateBps == 0 || l.busy <= t {
		return 0
	}
	return int(float64(l.busy-t) * l.cfg.RateBps / 8e9)
}

// Host is one simulated machine.
type Host struct {
	Addr netip.Addr
	EP   *transport.Endpoint
	// OnCompletion receives each completion the endpoint produces.
	OnCompletion func(now Time, c transport.Completion)

	idx     int
	net     *Network
	nicBusy bool
	rate    float64
	timerAt Time
	cqes    []transport.Completion
	links   map[netip.Addr]Route
	// up is the route for destinations without one of their own in
	// links: a fabric host's NIC ports (fabric.go).
	up Route
}

type evKind uint8

const (
	evDeliver evKind = iota
	evTxDone
	evTimer
	evCall
	evHop // a packet reaches a switch (host is the switch's index)
)

type event struct {
	at   Time
	kind evKind
	host int32
	buf  int32
	n    int32
	from int32
	dst  int32 // destination host (evHop: the switch forwards by it)
	ce   bool
	port uint16 // UDP source port
}

// Network is a simulated network and its event loop.
type Network struct {
	now      Time
	events   eventQueue
	hosts    []*Host
	switches []*Switch
	byAddr   map[netip.Addr]*Host
	rng      *rand.Rand
	bufs     [][]byte
	free     []int32
	calls    []func(now Time)
	bufLen   int

	// Events counts events processed.
	Events uint64
}

// New returns an empty network whose impairments draw from seed.
func New(seed uint64) *Network {
	return &Network{
		byAddr: map[netip.Addr]*Host{},
		rng:    rand.New(rand.NewPCG(seed, seed^0xdeadbeefcafef00d)),
	}
}

// Now returns the virtual time.
func (n *Network) Now() Time { return n.now }

// AddHost adds a host with an endpoint built from cfg; its NIC sends at
// rateBps.
func (n *Network) AddHost(addr netip.Addr, cfg transport.Config, rateBps float64) (*Host, error) {
	ep, err := transport.NewEndpoint(cfg, addr)
	if err != nil {
		return nil, fmt.Errorf("host %v: %w", addr, err)
	}
	h := &Host{Addr: addr, EP: ep, idx: len(n.hosts), net: n, rate: rateBps,
		timerAt: transport.Never, cqes: make([]transport.Completion, 64), links: map[netip.Addr]Route{}}
	n.hosts = append(n.hosts, h)
	n.byAddr[addr] = h
	if l := ep.MaxPacket(); l > n.bufLen {
		n.bufLen = l
	}
	return h, nil
}

// Connect adds a one-way link from a to b (replacing any route).
func (n *Network) Connect(a, b *Host, cfg LinkConfig) *Link {
	l := NewLink(b, cfg)
	a.links[b.Addr] = l
	return l
}

// NewLink makes a link towards b, for building routes.
func NewLink(b *Host, cfg LinkConfig) *Link { return &Link{cfg: cfg, to: b} }

// SetRoute makes a's packets for b take r.
func (n *Network) SetRoute(a, b *Host, r Route) { a.links[b.Addr] = r }

// At runs f at virtual time t (for scenarios: posting work, faults), or
// at once if t has passed.
func (n *Network) At(t Time, f func(now Time)) {
	n.calls = append(n.calls, f)
	n.push(event{at: max(t, n.now), kind: evCall, buf: int32(len(n.calls) - 1)})
}

// SetLink changes the impairments of l from now on.
func (l *Link) SetLink(cfg LinkConfig) { l.cfg = cfg }

// Kick makes h look for work now (after the scenario posted some).
func (h *Host) Kick() { h.service() }

func (n *Network) buf() int32 {
	if k := len(n.free); k > 0 {
		i := n.free[k-1]
		n.free = n.free[:k-1]
		return i
	}
	n.bufs = append(n.bufs, make([]byte, n.bufLen))
	return int32(len(n.bufs) - 1)
}

func (n *Network) release(i int32) { n.free = append(n.free, i) }

// Run processes events until none are left, until is reached, or stop
// returns true (checked after every event).
func (n *Network) Run(until Time, stop func() bool) {
	for n.events.len() > 0 {
		ev := n.events.pop()
		if ev.at > until {
			n.events.unpop()
			n.now = until
			return
		}
		n.now = ev.at
		n.Events++
		switch ev.kind {
		case evDeliver:
			h := n.hosts[ev.host]
			from := n.hosts[ev.from].Addr
			b := n.bufs[ev.buf][:ev.n]
			h.EP.ReceivePort(n.now, from, ev.port, ev.ce, b)
			n.release(ev.buf)
			h.service()
		case evTxDone:
			h := n.hosts[ev.host]
			h.nicBusy = false
			h.service()
		case evTimer:
			h := n.hosts[ev.host]
			if h.timerAt == ev.at {
				h.timerAt = transport.Never
				h.EP.Timeout(n.now)
				h.service()
			}
		case evCall:
			f := n.calls[ev.buf]
			n.calls[ev.buf] = nil
			f(n.now)
		case evHop:
			sw := n.switches[ev.host]
			if l := sw.pick(ev.from, ev.dst, ev.port); l != nil {
				l.carry(n, ev.from, ev.dst, ev.buf, int(ev.n), ev.port, ev.ce, n.now)
			} else {
				sw.NoRoute++
				n.release(ev.buf)
			}
		}
		if stop != nil && stop() {
			return
		}
	}
}

// service moves a host forward at the current time: completions to the
// scenario (which may post work), then one packet onto its NIC if the NIC
// is free, then the next timer.
func (h *Host) service() {
	n := h.net
	for {
		k := h.EP.PollCompletions(h.cqes)
		if k == 0 {
			break
		}
		for _, c := range h.cqes[:k] {
			if h.OnCompletion != nil {
				h.OnCompletion(n.now, c)
			}
		}
	}
	if !h.nicBusy {
		bi := n.buf()
		b := n.bufs[bi]
		d, ok := h.EP.Transmit(n.now, b)
		if ok {
			ser := Time(float64((d.Len+WireOverhead)*8) / h.rate * 1e9)
			h.nicBusy = true
			n.push(event{at: n.now + ser, kind: evTxDone, host: int32(h.idx)})
			r, dst := h.links[d.Dst], int32(-1)
			if r == nil && h.up != nil {
				// Switches forward by destination host, found once here.
				r = h.up
				if to := n.byAddr[d.Dst]; to != nil {
					dst = int32(to.idx)
				}
			}
			if r != nil {
				r.Pick(d, h).carry(n, int32(h.idx), dst, bi, d.Len, d.SrcPort, false, n.now+ser)
			} else {
				n.release(bi)
			}
		} else {
			n.release(bi)
		}
	}
	if t := h.EP.NextTimeout(); t != transport.Never && t < h.timerAt {
		h.timerAt = max(t, n.now)
		n.push(event{at: h.timerAt, kind: evTimer, host: int32(h.idx)})
	}
}

// carry puts a packet that finishes serialising at t on the link: from
// is the sending host, dst the destination host (-1 when the link ends
// at a host), ce whether an earlier hop marked it.
func (l *Link) carry(n *Network, from, dst int32, bi int32, size int, port uint16, ce bool, t Time) {
	c := &l.cfg
	l.Stats.Packets++
	l.Stats.Bytes += uint64(size)
	if l.down {
		l.Stats.Dropped++
		n.release(bi)
		return
	}
	if c.Drop != nil && c.Drop(n.now, n.bufs[bi][:size]) {
		l.Stats.Dropped++
		n.release(bi)
		return
	}
	if c.Loss > 0 && n.rng.Float64() < c.Loss {
		l.Stats.Dropped++
		n.release(bi)
		return
	}
	if c.Corrupt > 0 && n.rng.Float64() < c.Corrupt {
		l.Stats.Corrupted++
		bit := n.rng.IntN(size * 8)
		n.bufs[bi][bit/8] ^= 1 << (bit % 8)
	}
	if c.RateBps > 0 {
		// An output-queued port: FIFO at the link rate. The backlog a
		// packet finds is what the link still has to send when it comes.
		q := l.Backlog(t)
		l.Stats.Queue.Add(q)
		if c.QueueBytes > 0 && q+size > c.QueueBytes {
			l.Stats.QueueDrops++
			n.release(bi)
			return
		}
		if c.ECNBytes > 0 && q >= c.ECNBytes {
			ce = true
			l.Stats.Marked++
		}
		if q+size > l.Stats.MaxQueueBytes {
			l.Stats.MaxQueueBytes = q + size
		}
		start := max(t, l.busy)
		// Rounded up to the nanosecond: truncating would let a port
		// send a little faster than its rate (125.12 ns per 1564-byte
		// frame at 100 Gb/s would become 125).
		l.busy = start + Time(math.Ceil(float64((size+WireOverhead)*8)/c.RateBps*1e9))
		t = l.busy
	}
	l.Stats.Carried += uint64(size + WireOverhead)
	at := t + Time(c.Delay)
	if c.Hold != nil {
		at += Time(c.Hold(n.now, n.bufs[bi][:size]))
	}
	if c.Reorder > 0 && n.rng.Float64() < c.Reorder {
		l.Stats.Reordered++
		at += Time(n.rng.Int64N(int64(c.ReorderDelay) + 1))
	}
	if l.chain && c.Dup == 0 {
		// The switch decides now what it would decide at the packet's
		// arrival (its hash does not change), and the next link takes
		// the packet as arriving at that time: one event fewer per
		// packet. See Link.chain for what that approximates.
		if nl := l.sw.pick(from, dst, port); nl != nil {
			nl.carry(n, from, dst, bi, size, port, ce, at)
		} else {
			l.sw.NoRoute++
			n.release(bi)
		}
		return
	}
	ev := event{at: at, kind: evDeliver, buf: bi, n: int32(size), from: from, dst: dst, ce: ce, port: port}
	if l.sw != nil {
		ev.kind, ev.host = evHop, l.sw.idx
	} else {
		ev.host = int32(l.to.idx)
	}
	if c.Dup > 0 && n.rng.Float64() < c.Dup {
		l.Stats.Duplicated++
		d := ev
		d.at, d.buf = at+1, n.buf()
		copy(n.bufs[d.buf], n.bufs[bi][:size])
		n.push(d)
	}
	n.push(ev)
}

func (n *Network) push(ev event) { n.events.push(ev) }
