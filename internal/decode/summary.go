package decode

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/metaroce/metaroce/wire"
)

// An end is one side of a connection: the address of a host and the
// connection id it picked (§1.5). A packet names its receiver's end by
// DstConn; conn packets name the sender's by SrcConn too.
type end struct {
	addr netip.Addr
	id   uint32
}

func (e end) String() string { return fmt.Sprintf("%s/0x%08x", e.addr, e.id) }

// Summary is what a capture shows, connection by connection.
type Summary struct {
	File    string `json:"file"`
	Records int    `json:"records"`
	Packets int    `json:"metaroce_packets"`
	Other   int    `json:"other_records"`
	// Truncated records (shorter than on the wire, a snap length) are
	// skipped: without the last four bytes there is no CRC32C to check.
	Truncated   int            `json:"truncated_records,omitempty"`
	Drops       map[string]int `json:"drops,omitempty"`
	Connections []*ConnSummary `json:"connections"`
	// PacketList is every MetaRoCE packet, with -packets.
	PacketList []*Packet `json:"packets,omitempty"`
}

// ConnSummary is one connection: its two ends, and each direction's
// traffic. An end whose peer the capture never names (no ACCEPT or
// DISCONNECT was seen) is a connection with one known end.
type ConnSummary struct {
	// A and B are the ends, "addr/0xid"; A is the initiator when the
	// capture shows the CONNECT, else the lower address.
	A string `json:"a"`
	B string `json:"b"`
	// Directions: "A>B" is what A sent to B.
	Directions []*DirSummary `json:"directions"`
	// Handshake lists the connection-management packets and the first
	// data packet of each direction, in capture order.
	Handshake []Event `json:"handshake"`

	a, b end
	dirs map[bool]*DirSummary // key: sent by A
}

// DirSummary is one direction of a connection: what its sender sent, and
// what the acks and NACKs its receiver returned say about it.
type DirSummary struct {
	From    string         `json:"from"`
	To      string         `json:"to"`
	Opcodes map[string]int `json:"opcodes"`
	// Entropy is the distinct UDP source ports of this sender's packets
	// (§2.3), data and control alike.
	Entropy     []uint16       `json:"entropy"`
	DataEntropy int            `json:"data_entropy_values"`
	Paths       []*PathSummary `json:"paths"`
	Transmits   int            `json:"transmissions"`
	Retransmits int            `json:"retransmissions"`
	PSNs        int            `json:"distinct_psns"`
	Nacks       map[string]int `json:"nacks_received,omitempty"`
	RTT         *RTTSummary    `json:"rtt,omitempty"`
	// Stamps is what the data packets' Timestamps say about when they
	// were stamped (§4.2): how many share one, and how late each reached
	// the capture point after it.
	Stamps      *StampSummary     `json:"timestamps,omitempty"`
	entropy     map[uint16]bool   `json:"-"`
	dataEntropy map[uint16]bool   `json:"-"`
	psns        map[uint32]bool   `json:"-"`
	paths       map[uint16]*pathT `json:"-"`
	sent        map[uint64]sentAt // by PathID<<32 | PathSeq
	rtts        []time.Duration
	stamps      map[uint64]*stampGroup // data transmissions by Timestamp
	lags        []int64                // capture time less Timestamp, ns (an unknown clock offset included)
	overDelay   []time.Duration        // acks whose AckDelay exceeds the capture's bound: by how much
}

// PathSummary is one logical path of a direction.
type PathSummary struct {
	PathID      uint16 `json:"path_id"`
	Transmits   int    `json:"transmissions"`
	Retransmits int    `json:"retransmissions"`
	Probes      int    `json:"probes"`
	// Gaps: path sequence numbers the capture never shows between the
	// lowest and highest it does: transmissions lost before the capture
	// point (or sent before the capture started, at the low end: never).
	Gaps int `json:"gaps_before_capture"`
	// Lost: transmissions the capture shows that the receiver's acks of
	// this path report missing (§5.1): lost after the capture point.
	Lost int `json:"lost_after_capture"`
	// Acks of this path that the receiver sent.
	Acks int `json:"acks"`
}

// sentAt is when the capture saw a transmission, and its Timestamp.
type sentAt struct {
	t  time.Time
	ts uint64
}

type pathT struct {
	PathSummary
	seqs    map[uint32]bool
	arrived map[uint32]bool
	covered map[uint32]bool
}

// RTTSummary is the round trip from the capture point: an ack's capture
// time less its AckDelay less the capture time of the transmission it
// speaks for (its PathID and PathAckSeq, with the Timestamp it echoes). Captured beside the sender, it is the network's
// round trip plus the receiver's processing; beside the receiver, only the
// receiver's own turnaround shows.
type RTTSummary struct {
	Samples int     `json:"samples"`
	MinUs   float64 `json:"min_us"`
	P50Us   float64 `json:"p50_us"`
	MaxUs   float64 `json:"max_us"`
}

// StampSummary describes a direction's data Timestamps (§4.2) against
// the capture. The sender's clock and the capture's differ by an unknown
// offset, so lag is reported beyond its minimum: a packet stamped when it
// was handed to the link reaches a capture point one hop away within a
// few microseconds of the fastest, and one stamped when its batch was
// formed, behind hundreds of others, arrives milliseconds late.
type StampSummary struct {
	Distinct int `json:"distinct"`
	// MaxShare is the most data transmissions that carry one Timestamp.
	MaxShare int `json:"max_share"`
	// SpreadMaxUs is the longest time between the first and the last
	// capture of transmissions that carry one Timestamp.
	SpreadMaxUs float64 `json:"spread_max_us"`
	// Lag beyond the minimum: capture time less Timestamp.
	LagP50Us float64 `json:"lag_p50_us"`
	LagP99Us float64 `json:"lag_p99_us"`
	LagMaxUs float64 `json:"lag_max_us"`
	// AckDelayOver counts the acks of this direction's data whose
	// AckDelay exceeds the time between the data's capture and the ack's
	// (the receiver cannot have held a packet longer than that: §5.1),
	// and AckDelayOverMaxUs is by how much at most.
	AckDelayOver      int     `json:"ack_delay_over"`
	AckDelayOverMaxUs float64 `json:"ack_delay_over_max_us"`
	Acks              int     `json:"acks_matched"`
}

type stampGroup struct {
	n           int
	first, last time.Time
}

// Event is one line of a handshake timeline.
type Event struct {
	Frame  int     `json:"frame"`
	T      float64 `json:"t_s"` // seconds since the capture's first record
	From   string  `json:"from"`
	Opcode string  `json:"opcode"`
	Detail string  `json:"detail,omitempty"`
}

// union-find over ends, linked by the conn packets that name both.
type ends map[end]end

func (u ends) find(e end) end {
	for {
		p, ok := u[e]
		if !ok || p == e {
			return e
		}
		e = p
	}
}

func (u ends) link(a, b end) {
	for _, e := range []end{a, b} {
		if _, ok := u[e]; !ok {
			u[e] = e
		}
	}
	ra, rb := u.find(a), u.find(b)
	if ra != rb {
		u[rb] = ra
	}
}

// endsOf returns the end a packet names for its receiver (to) and, for
// conn packets that carry one, for its sender (from); a zero id means
// none.
func endsOf(p *Packet) (from, to end) {
	b := p.b
	to = end{p.dst.Addr(), wire.Prefix(b).DstConn()}
	if wire.Opcode(b[1]).Class() == wire.ClassConn && len(b) >= wire.ConnLen+wire.TrailerLen {
		from = end{p.src.Addr(), wire.Conn(b).SrcConn()}
	}
	return from, to
}

// summarize builds the per-connection summary of pkts (valid packets
// only; dropped ones count in Drops).
func summarize(s *Summary, pkts []*Packet, t0 time.Time) {
	u := ends{}
	initiators := map[end]bool{}
	for _, p := range pkts {
		if p.Drop != "" {
			continue
		}
		from, to := endsOf(p)
		if from.id != 0 && to.id != 0 {
			u.link(from, to)
		}
		if wire.Opcode(p.b[1]) == wire.OpConnect {
			initiators[from] = true
		}
	}
	// Each root is a connection; its members are at most its two ends.
	conns := map[end]*ConnSummary{}
	members := map[end][]end{}
	for e := range u {
		r := u.find(e)
		members[r] = append(members[r], e)
	}
	connOf := func(e end) *ConnSummary {
		r := u.find(e)
		if c, ok := conns[r]; ok {
			return c
		}
		m := members[r]
		if len(m) == 0 {
			m = []end{e}
		}
		slices.SortFunc(m, func(x, y end) int {
			if initiators[x] != initiators[y] {
				if initiators[x] {
					return -1
				}
				return 1
			}
			return cmp.Or(x.addr.Compare(y.addr), cmp.Compare(x.id, y.id))
		})
		c := &ConnSummary{a: m[0], dirs: map[bool]*DirSummary{}}
		if len(m) > 1 {
			c.b = m[1]
		}
		c.A, c.B = c.a.String(), c.b.String()
		if c.b.id == 0 {
			c.B = "?"
		}
		conns[r] = c
		s.Connections = append(s.Connections, c)
		return c
	}
	for _, p := range pkts {
		if p.Drop != "" {
			continue
		}
		from, to := endsOf(p)
		var c *ConnSummary
		var byA bool
		switch {
		case to.id != 0:
			c = connOf(to)
			byA = c.a != to
		case from.id != 0: // CONNECT, RESET
			c = connOf(from)
			byA = c.a == from
		default:
			continue
		}
		c.add(p, byA, t0)
	}
	for _, c := range s.Connections {
		c.finish()
	}
	// s.Connections is in the order the capture first shows them.
}

func (c *ConnSummary) dir(byA bool) *DirSummary {
	d := c.dirs[byA]
	if d == nil {
		d = &DirSummary{Opcodes: map[string]int{}, entropy: map[uint16]bool{}, dataEntropy: map[uint16]bool{},
			psns: map[uint32]bool{}, paths: map[uint16]*pathT{}, sent: map[uint64]sentAt{},
			stamps: map[uint64]*stampGroup{}}
		d.From, d.To = c.A, c.B
		if !byA {
			d.From, d.To = c.B, c.A
		}
		c.dirs[byA] = d
	}
	return d
}

func (d *DirSummary) path(id uint16) *pathT {
	pt := d.paths[id]
	if pt == nil {
		pt = &pathT{PathSummary: PathSummary{PathID: id}, seqs: map[uint32]bool{}, arrived: map[uint32]bool{}, covered: map[uint32]bool{}}
		d.paths[id] = pt
	}
	return pt
}

func (c *ConnSummary) add(p *Packet, byA bool, t0 time.Time) {
	d := c.dir(byA)
	op := wire.Opcode(p.b[1])
	d.Opcodes[op.String()]++
	d.entropy[p.src.Port()] = true
	from := "A"
	if !byA {
		from = "B"
	}
	ev := func(detail string) {
		c.Handshake = append(c.Handshake, Event{Frame: p.Frame, T: p.Time.Sub(t0).Seconds(), From: from, Opcode: op.String(), Detail: detail})
	}
	switch op.Class() {
	case wire.ClassData:
		k := wire.Data(p.b)
		d.dataEntropy[p.src.Port()] = true
		pt := d.path(k.PathID())
		pt.Transmits++
		pt.seqs[k.PathSeq()] = true
		d.Transmits++
		if op == wire.OpProbe {
			pt.Probes++
		} else {
			if d.PSNs == 0 && len(d.psns) == 0 {
				ev(fmt.Sprintf("first data, psn 0x%08x", uint32(k.PSN())))
			}
			d.psns[uint32(k.PSN())] = true
		}
		if k.Flags()&wire.FlagRetx != 0 {
			pt.Retransmits++
			d.Retransmits++
		}
		d.sent[uint64(k.PathID())<<32|uint64(k.PathSeq())] = sentAt{p.Time, k.Timestamp()}
		if op != wire.OpProbe {
			g := d.stamps[k.Timestamp()]
			if g == nil {
				g = &stampGroup{first: p.Time}
				d.stamps[k.Timestamp()] = g
			}
			g.n++
			g.last = p.Time
			d.lags = append(d.lags, p.Time.UnixNano()-int64(k.Timestamp()))
		}
	case wire.ClassAck:
		// An ack speaks for the other direction's path.
		a := wire.Ack(p.b)
		od := c.dir(!byA)
		pt := od.path(a.PathID())
		pt.Acks++
		top := a.PathAckSeq()
		for i := uint32(0); i < wire.SackBits; i++ {
			seq := top - i
			pt.covered[seq] = true
			if a.Received(i) {
				pt.arrived[seq] = true
			}
		}
		// The ack speaks for the transmission PathID, PathAckSeq; its
		// echoed Timestamp confirms which one it was.
		if at, ok := od.sent[uint64(a.PathID())<<32|uint64(top)]; ok && at.ts == a.EchoTimestamp() {
			if r := p.Time.Sub(at.t) - time.Duration(a.AckDelay()); r >= 0 {
				od.rtts = append(od.rtts, r)
			} else {
				od.overDelay = append(od.overDelay, -r)
			}
		}
	case wire.ClassNack:
		k := wire.Nack(p.b)
		od := c.dir(!byA)
		if od.Nacks == nil {
			od.Nacks = map[string]int{}
		}
		od.Nacks[k.Reason().String()]++
	case wire.ClassConn:
		k := wire.Conn(p.b)
		switch op {
		case wire.OpConnect, wire.OpAccept:
			cookie := "no cookie"
			for _, x := range k.Cookie() {
				if x != 0 {
					cookie = "cookie"
					break
				}
			}
			if op == wire.OpAccept {
				cookie = fmt.Sprintf("id 0x%08x", k.SrcConn())
			}
			ev(fmt.Sprintf("%s, initial psn 0x%08x, window %d, paths %d", cookie, uint32(k.InitialPSN()), k.RecvWindow(), k.Paths()))
		case wire.OpChallenge:
			ev("cookie")
		case wire.OpDisconnect:
			ev(fmt.Sprintf("%s, received psn 0x%08x", connReasonName(k.Reason()), uint32(k.ReceivedPSN())))
		default:
			ev(connReasonName(k.Reason()))
		}
	}
}

func (c *ConnSummary) finish() {
	for _, byA := range []bool{true, false} {
		d := c.dirs[byA]
		if d == nil {
			continue
		}
		for e := range d.entropy {
			d.Entropy = append(d.Entropy, e)
		}
		slices.Sort(d.Entropy)
		d.DataEntropy = len(d.dataEntropy)
		d.PSNs = len(d.psns)
		for _, pt := range d.paths {
			if len(pt.seqs) > 0 {
				// Serial arithmetic from the first seen: the span is
				// small against 2^31 (§1.4).
				var lo, hi uint32
				first := true
				for s := range pt.seqs {
					if first {
						lo, hi, first = s, s, false
						continue
					}
					if int32(s-lo) < 0 {
						lo = s
					}
					if int32(s-hi) > 0 {
						hi = s
					}
				}
				pt.Gaps = int(hi-lo) + 1 - len(pt.seqs)
			}
			for s := range pt.seqs {
				if pt.covered[s] && !pt.arrived[s] {
					pt.Lost++
				}
			}
			d.Paths = append(d.Paths, &pt.PathSummary)
		}
		slices.SortFunc(d.Paths, func(x, y *PathSummary) int { return cmp.Compare(x.PathID, y.PathID) })
		if n := len(d.rtts); n > 0 {
			slices.Sort(d.rtts)
			us := func(x time.Duration) float64 { return float64(x) / 1e3 }
			d.RTT = &RTTSummary{Samples: n, MinUs: us(d.rtts[0]), P50Us: us(d.rtts[n/2]), MaxUs: us(d.rtts[n-1])}
		}
		d.Stamps = d.stampSummary()
		c.Directions = append(c.Directions, d)
	}
}

func (d *DirSummary) stampSummary() *StampSummary {
	if len(d.lags) == 0 {
		return nil
	}
	us := func(x int64) float64 { return float64(x) / 1e3 }
	s := &StampSummary{Distinct: len(d.stamps), Acks: len(d.rtts) + len(d.overDelay), AckDelayOver: len(d.overDelay)}
	for _, g := range d.stamps {
		s.MaxShare = max(s.MaxShare, g.n)
		s.SpreadMaxUs = max(s.SpreadMaxUs, us(int64(g.last.Sub(g.first))))
	}
	slices.Sort(d.lags)
	lo, n := d.lags[0], len(d.lags)
	s.LagP50Us, s.LagP99Us, s.LagMaxUs = us(d.lags[n/2]-lo), us(d.lags[n*99/100]-lo), us(d.lags[n-1]-lo)
	for _, o := range d.overDelay {
		s.AckDelayOverMaxUs = max(s.AckDelayOverMaxUs, us(int64(o)))
	}
	return s
}
