package transport_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// pair is two endpoints on a simulated link, A the initiator, B the
// listener, with a region on B for A's RDMA operations. Tests read as
// scenarios: build a pair, impair its links, post work, run, check.
type pair struct {
	t      *testing.T
	net    *sim.Network
	a, b   *sim.Host
	ab, ba *sim.Link
	ca, cb *transport.Conn
	memB   *transport.MemoryTable
	region []byte
	key    uint32
	cqA    []transport.Completion
	cqB    []transport.Completion
	// onA and onB, if set, see completions as they happen.
	onA, onB func(now sim.Time, c transport.Completion)
}

const regionAddr = 0x10000000

func newPair(t *testing.T, cfg transport.Config, link sim.LinkConfig, regionSize int) *pair {
	t.Helper()
	p := &pair{t: t, net: sim.New(11), key: 0x5eed1234}
	cfg.Seed = 1
	var err error
	p.a, err = p.net.AddHost(netip.MustParseAddr("10.0.0.1"), cfg, link.RateBps)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = 2
	p.b, err = p.net.AddHost(netip.MustParseAddr("10.0.0.2"), cfg, link.RateBps)
	if err != nil {
		t.Fatal(err)
	}
	p.ab = p.net.Connect(p.a, p.b, link)
	p.ba = p.net.Connect(p.b, p.a, link)
	p.region = make([]byte, regionSize)
	p.memB = transport.NewMemoryTable()
	p.memB.Add(&transport.Region{Key: p.key, Addr: regionAddr, Buf: p.region,
		Access: transport.AccessRemoteWrite | transport.AccessRemoteRead | transport.AccessLocalWrite})
	p.b.EP.Listen(1, p.memB)
	p.a.OnCompletion = func(now sim.Time, c transport.Completion) {
		if c.Op == transport.OpConnected {
			p.ca = c.Conn
		}
		p.cqA = append(p.cqA, c)
		if p.onA != nil {
			p.onA(now, c)
		}
	}
	p.b.OnCompletion = func(now sim.Time, c transport.Completion) {
		if c.Op == transport.OpConnected {
			p.cb = c.Conn
		}
		p.cqB = append(p.cqB, c)
		if p.onB != nil {
			p.onB(now, c)
		}
	}
	return p
}

func (p *pair) connect() {
	p.t.Helper()
	if _, err := p.a.EP.Connect(p.net.Now(), p.b.Addr, 1, transport.NewMemoryTable()); err != nil {
		p.t.Fatal(err)
	}
	p.a.Kick()
	p.runUntil(time.Second, func() bool { return p.ca != nil && p.cb != nil })
	if p.ca == nil || p.cb == nil {
		p.t.Fatalf("not connected after 1s: A %v B %v", p.cqA, p.cqB)
	}
}

// connectMany opens n more connections from A to B's service and returns
// them in the order they came up.
func (p *pair) connectMany(n int) []*transport.Conn {
	p.t.Helper()
	var conns []*transport.Conn
	prev := p.onA
	defer func() { p.onA = prev }()
	p.onA = func(now sim.Time, c transport.Completion) {
		if c.Op == transport.OpConnected {
			conns = append(conns, c.Conn)
		}
		if prev != nil {
			prev(now, c)
		}
	}
	for range n {
		if _, err := p.a.EP.Connect(p.net.Now(), p.b.Addr, 1, transport.NewMemoryTable()); err != nil {
			p.t.Fatal(err)
		}
	}
	p.a.Kick()
	p.runUntil(5*time.Second, func() bool { return len(conns) == n })
	if len(conns) != n {
		p.t.Fatalf("%d of %d connected", len(conns), n)
	}
	return conns
}

// runUntil runs the network for at most d of virtual time or until cond.
func (p *pair) runUntil(d time.Duration, cond func() bool) {
	p.net.Run(p.net.Now()+sim.Time(d), cond)
}

// writesInTurn has A write src to B's region n times, each once the one
// before has completed, and returns when each was posted and completed.
func (p *pair) writesInTurn(n int, src []byte) (posted, done []sim.Time) {
	p.t.Helper()
	prev := p.onA
	defer func() { p.onA = prev }()
	p.onA = func(now sim.Time, c transport.Completion) {
		if c.Op == transport.OpWrite {
			done = append(done, now)
		}
		if prev != nil {
			prev(now, c)
		}
	}
	for i := range n {
		posted = append(posted, p.net.Now())
		p.ca.PostWrite(&transport.WorkRequest{WRID: uint64(i), Local: src, RemoteAddr: regionAddr, RKey: p.key})
		p.kick()
		p.runUntil(10*time.Millisecond, func() bool { return len(done) == i+1 })
		if len(done) != i+1 {
			p.t.Fatalf("write %d did not complete", i)
		}
	}
	return posted, done
}

// idle runs the network for d regardless.
func (p *pair) idle(d time.Duration) { p.net.Run(p.net.Now()+sim.Time(d), nil) }

// kick makes both hosts notice posted work.
func (p *pair) kick() { p.a.Kick(); p.b.Kick() }

func count(cqs []transport.Completion, op transport.Op, st transport.Status) int {
	n := 0
	for _, c := range cqs {
		if c.Op == op && c.Status == st {
			n++
		}
	}
	return n
}

// dropIf returns a link filter dropping data packets that match f.
func dropIf(f func(now sim.Time, d wire.Data) bool) func(sim.Time, []byte) bool {
	return func(now sim.Time, pkt []byte) bool {
		p, err := wire.Parse(pkt)
		if err != nil || p.Class != wire.ClassData {
			return false
		}
		return f(now, p.Data())
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) * 2654435761
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}
