package transport

import (
	"net/netip"
	"testing"
	"time"
)

// tlink is two endpoints on an in-memory link, driven in virtual time,
// inside the package so a test can look at the state it is about (a
// path's ring, a timer) and forge packets. Endpoint 0 connects, endpoint
// 1 listens. The sim package does the same from outside, with a fabric;
// this one is small enough for the fuzz target to build per input.
type tlink struct {
	tb    testing.TB
	now   Time
	eps   [2]*Endpoint
	addrs [2]netip.Addr
	conns [2]*Conn
	mems  [2]*MemoryTable
	// regions[i] is the RDMA target endpoint i exposes, key regionKey.
	regions [2][]byte
	q       []tpkt // in flight, by arrival time
	delay   Duration
	// filter, if set, sees every packet as it is sent and says what
	// becomes of it: deliver it (after delay plus extra), or drop it.
	filter func(from int, pkt []byte) (drop bool, extra Duration)
	cq     [2][]Completion
	// wakeups counts Timeout calls per endpoint: a timer that spins
	// shows up here.
	wakeups [2]int
	buf     []byte
	cqBuf   []Completion
}

type tpkt struct {
	at       Time
	from, to int
	port     uint16
	b        []byte
}

const (
	regionKey  = 0x5eed
	regionBase = 0x100000
	tService   = 7
)

func newTLink(tb testing.TB, cfg Config, regionSize int) *tlink {
	l := &tlink{tb: tb, delay: 2 * time.Microsecond,
		addrs: [2]netip.Addr{netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.1.0.2")}}
	for i := range l.eps {
		c := cfg
		c.Seed = uint64(i + 1)
		ep, err := NewEndpoint(c, l.addrs[i])
		if err != nil {
			tb.Fatal(err)
		}
		l.eps[i] = ep
		l.regions[i] = make([]byte, regionSize)
		l.mems[i] = NewMemoryTable()
		l.mems[i].Add(&Region{Key: regionKey, Addr: regionBase, Buf: l.regions[i],
			Access: AccessRemoteWrite | AccessRemoteRead | AccessLocalWrite})
	}
	l.buf = make([]byte, l.eps[0].MaxPacket())
	l.cqBuf = make([]Completion, 64)
	l.eps[1].Listen(tService, l.mems[1])
	return l
}

// connect runs the handshake and fails the test if it does not finish.
func (l *tlink) connect() {
	l.tb.Helper()
	if _, err := l.eps[0].Connect(l.now, l.addrs[1], tService, l.mems[0]); err != nil {
		l.tb.Fatal(err)
	}
	l.run(Time(time.Second), func() bool { return l.conns[0] != nil && l.conns[1] != nil })
	if l.conns[0] == nil || l.conns[1] == nil {
		l.tb.Fatalf("not connected: %v %v", l.cq[0], l.cq[1])
	}
}

// flush sends everything the endpoints owe now and collects completions.
func (l *tlink) flush() {
	for i, ep := range l.eps {
		for {
			d, ok := ep.Transmit(l.now, l.buf)
			if !ok {
				break
			}
			l.send(i, d.SrcPort, l.buf[:d.Len])
		}
		for {
			n := ep.PollCompletions(l.cqBuf)
			if n == 0 {
				break
			}
			for _, c := range l.cqBuf[:n] {
				if c.Op == OpConnected {
					l.conns[i] = c.Conn
				}
				l.cq[i] = append(l.cq[i], c)
			}
		}
	}
}

// send puts pkt from endpoint i on the link, through the filter.
func (l *tlink) send(from int, port uint16, pkt []byte) {
	extra := Duration(0)
	if l.filter != nil {
		var drop bool
		if drop, extra = l.filter(from, pkt); drop {
			return
		}
	}
	l.inject(from, port, append([]byte(nil), pkt...), l.delay+extra)
}

// inject delivers b to the endpoint that is not from, after d.
func (l *tlink) inject(from int, port uint16, b []byte, d Duration) {
	p := tpkt{at: l.now + Time(d), from: from, to: 1 - from, port: port, b: b}
	i := len(l.q)
	for i > 0 && l.q[i-1].at > p.at {
		i--
	}
	l.q = append(l.q, tpkt{})
	copy(l.q[i+1:], l.q[i:])
	l.q[i] = p
}

// step runs the earliest event at or before until and reports whether
// there was one.
func (l *tlink) step(until Time) bool {
	l.flush()
	next := until + 1
	if len(l.q) > 0 {
		next = l.q[0].at
	}
	for _, ep := range l.eps {
		next = min(next, ep.NextTimeout())
	}
	if next > until {
		return false
	}
	l.now = max(l.now, next)
	for len(l.q) > 0 && l.q[0].at <= l.now {
		p := l.q[0]
		l.q = l.q[1:]
		l.eps[p.to].ReceivePort(l.now, l.addrs[p.from], p.port, false, p.b)
	}
	for i, ep := range l.eps {
		if ep.NextTimeout() <= l.now {
			l.wakeups[i]++
			ep.Timeout(l.now)
		}
	}
	l.flush()
	return true
}

// run runs for at most d of virtual time or until cond holds.
func (l *tlink) run(d Time, cond func() bool) {
	until := l.now + d
	for {
		if cond != nil && cond() {
			return
		}
		if !l.step(until) {
			l.now = until
			return
		}
	}
}

// completions counts endpoint i's completions of op with status st.
func (l *tlink) completions(i int, op Op, st Status) int {
	n := 0
	for _, c := range l.cq[i] {
		if c.Op == op && c.Status == st {
			n++
		}
	}
	return n
}

// done counts endpoint i's completions of op, whatever their status.
func (l *tlink) done(i int, op Op) int {
	n := 0
	for _, c := range l.cq[i] {
		if c.Op == op {
			n++
		}
	}
	return n
}
