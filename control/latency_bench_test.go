package control_test

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/dataplane/udplink"
	"github.com/metaroce/metaroce/internal/apptest"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// stampLink is a Link that notes when the last WRITE_IMM packet left
// (SubmitTx) and arrived (Receive), so a latency benchmark can split a
// round trip into its hops. One clock read per data packet: test only.
type stampLink struct {
	dataplane.Link
	epoch  time.Time
	tx, rx atomic.Int64 // ns since epoch
}

func (l *stampLink) Receive(batch []dataplane.RxPacket) int {
	n := l.Link.Receive(batch)
	for i := range batch[:n] {
		if isWriteImm(batch[i].Payload) {
			l.rx.Store(int64(time.Since(l.epoch)))
		}
	}
	return n
}

func (l *stampLink) SubmitTx(batch []dataplane.TxPacket) error {
	for i := range batch {
		if batch[i].Len > 0 && isWriteImm(batch[i].Buf[:batch[i].Len]) {
			l.tx.Store(int64(time.Since(l.epoch)))
		}
	}
	return l.Link.SubmitTx(batch)
}

// PollFD passes the link's own on, so that the engine sleeps on it as it
// would on the bare link (stamp hides it for a link without one).
func (l *stampLink) PollFD() (int, bool) { return l.Link.(dataplane.PollFDer).PollFD() }

// stamp wraps l; the first result is what the engine gets.
func stamp(l dataplane.Link, epoch time.Time) (dataplane.Link, *stampLink) {
	s := &stampLink{Link: l, epoch: epoch}
	if _, ok := l.(dataplane.PollFDer); ok {
		return s, s
	}
	return struct {
		dataplane.Link
	}{s}, s
}

// poolLink is a MemLink that hands out transmit frames from a fixed pool,
// which the peer's Release gives back, where MemLink allocates a frame per
// packet: 16 frames of 9000 bytes zeroed per flush cost more than the
// whole wire hop, and the garbage collector's pauses came on top.
type poolLink struct {
	*dataplane.MemLink
	pool chan []byte // free transmit frames
	peer *poolLink
}

func newPoolPair(a, b netip.Addr) (*poolLink, *poolLink) {
	ma, mb := dataplane.NewMemPair(a, b, 9000, 0, 7)
	mk := func(m *dataplane.MemLink) *poolLink {
		l := &poolLink{MemLink: m, pool: make(chan []byte, 256)}
		for range cap(l.pool) {
			l.pool <- make([]byte, 9000)
		}
		return l
	}
	x, y := mk(ma), mk(mb)
	x.peer, y.peer = y, x
	return x, y
}

func (l *poolLink) ReserveTx(batch []dataplane.TxPacket) int {
	for i := range batch {
		select {
		case f := <-l.pool:
			batch[i] = dataplane.TxPacket{Buf: f}
		default:
			return i
		}
	}
	return len(batch)
}

func (l *poolLink) SubmitTx(batch []dataplane.TxPacket) error {
	for i := range batch {
		if batch[i].Len == 0 {
			l.pool <- batch[i].Buf
		}
	}
	return l.MemLink.SubmitTx(batch)
}

// Release gives the frames back to the peer's pool (they are its).
func (l *poolLink) Release(batch []dataplane.RxPacket) {
	for i := range batch {
		l.peer.pool <- batch[i].Payload[:cap(batch[i].Payload)]
		batch[i].Payload = nil
	}
}

func isWriteImm(p []byte) bool {
	return len(p) >= wire.PrefixLen && p[0] == wire.Version && wire.Opcode(p[1]) == wire.OpWriteImm
}

// linkPair makes the two links a latency run uses: "mem", the in-memory
// twin (with pooled frames), or "udp", UDP sockets on loopback
// (127.0.0.1 and 127.0.0.2), which puts the kernel's stack and a real
// descriptor to sleep on in the path.
func linkPair(b *testing.B, kind string) (x, y dataplane.Link, a, bb netip.Addr, cfg transport.Config) {
	switch kind {
	case "mem":
		a, bb = netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2")
		pa, pb := newPoolPair(a, bb)
		return pa, pb, a, bb, transport.Config{}
	}
	a, bb = netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	port := uint16(20000 + rand.IntN(20000))
	var ls [2]dataplane.Link
	for i, addr := range []netip.Addr{a, bb} {
		l, err := udplink.Open(udplink.Config{Local: addr, Port: port})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		ls[i] = l
	}
	return ls[0], ls[1], a, bb, transport.Config{Port: port}
}

// hops are one round trip's timestamps (ns since the epoch).
type hops struct{ postA, txA, rxB, cqB, postB, txB, rxA, cqA int64 }

// BenchmarkWriteLatency is an application's WRITE round trip through the
// client API, perftest's write-lat: application A writes (with an
// immediate) into B's memory; B's application sees the completion and
// writes back; A's sees that. Two daemons (engine and control server
// each) and two applications, all in this process (GOMAXPROCS raised so
// that every polling thread has a P, as four processes would), joined by
// "mem", the in-memory link, or "udp", UDP sockets on loopback. Reported
// per round trip: p50-us and p99-us; the hops' medians (a-post-to-wire-us:
// A's application to its engine to the wire; wire-us: both link
// crossings, the receiving engine's pick-up included; b-wire-to-app-us:
// B's engine to B's application; b-post-to-wire-us; a-wire-to-app-us);
// floor-p50-us and floor-p99-us, the same kind of link's raw round trip
// between two threads polling it, measured in the same run; and how often
// the engines slept or found the CPU taken (engine-sleeps/op,
// yield-stalls/op). ns/op is reported as 0: the round trip is p50-us.
func BenchmarkWriteLatency(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	for _, kind := range []string{"mem", "udp"} {
		b.Run(kind, func(b *testing.B) { writeLatency(b, kind) })
	}
}

func writeLatency(b *testing.B, kind string) {
	fx, fy, fa, _, _ := linkPair(b, kind)
	floor50, floor99 := linkFloor(fx, fy, fa, 20000)

	x, y, a, bb, cfg := linkPair(b, kind)
	epoch := time.Now()
	sx, la := stamp(x, epoch)
	sy, lb := stamp(y, epoch)
	dir := b.TempDir()
	ha := apptest.Start(b, a, sx, cfg, config.Limits{}, filepath.Join(dir, "a.sock"))
	hb := apptest.Start(b, bb, sy, cfg, config.Limits{}, filepath.Join(dir, "b.sock"))
	ca, cb := apptest.Dial(b, ha.Sock), apptest.Dial(b, hb.Sock)
	const size = 64
	ra := apptest.Region(b, ca, 4096, client.RemoteWrite)
	rb := apptest.Region(b, cb, 4096, client.RemoteWrite)
	qa, qb := pair(b, ca, cb, hb.Addr)
	ns := func() int64 { return int64(time.Since(epoch)) }

	n := b.N + 200 // the first 200 warm up and are not counted
	rec := make([]hops, n)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	waitImm := func(q *client.QP) error {
		var c [4]client.Completion
		for {
			k, err := q.WaitCQ(ctx, c[:])
			if err != nil {
				return err
			}
			got := false
			for _, x := range c[:k] {
				if err := x.Err(); err != nil {
					return err
				}
				got = got || x.Op == client.CompRecvWriteImm
			}
			if got {
				return nil
			}
		}
	}
	errc := make(chan error, 1)
	go func() { // B's application: answer every write
		for i := range n {
			if err := waitImm(qb); err != nil {
				errc <- err
				return
			}
			rec[i].cqB = ns()
			rec[i].rxB = lb.rx.Load()
			rec[i].postB = ns()
			if err := qb.PostWriteImm(uint64(i), rb, 0, size, ra.Addr, ra.Key, uint32(i)); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	b.ResetTimer()
	for i := range n {
		if i == 200 {
			b.ResetTimer()
		}
		rec[i].postA = ns()
		if err := qa.PostWriteImm(uint64(i), ra, 0, size, rb.Addr, rb.Key, uint32(i)); err != nil {
			b.Fatal(err)
		}
		if err := waitImm(qa); err != nil {
			b.Fatal(err)
		}
		rec[i].cqA = ns()
		rec[i].rxA, rec[i].txB = la.rx.Load(), lb.tx.Load()
		rec[i].txA = la.tx.Load()
	}
	b.StopTimer()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	var stalls, sleeps, handoffs uint64
	for _, h := range []*apptest.Host{ha, hb} {
		st := &h.Eng.Stats
		stalls += st.YieldStalls.Load()
		sleeps += st.Sleeps.Load()
		handoffs += st.Handoffs.Load()
	}
	b.ReportMetric(float64(handoffs)/float64(n), "engine-handoffs/op")
	// Per round trip, both engines: how often they slept, and how often a
	// yield lost the CPU for long (a busy machine: see dataplane's doc).
	b.ReportMetric(float64(sleeps)/float64(n), "engine-sleeps/op")
	b.ReportMetric(float64(stalls)/float64(n), "yield-stalls/op")
	rec = rec[200:]
	med := func(f func(h hops) int64) (float64, float64) {
		v := make([]float64, len(rec))
		for i, h := range rec {
			v[i] = float64(f(h)) / 1e3
		}
		slices.Sort(v)
		return v[len(v)/2], v[min(len(v)-1, len(v)*99/100)]
	}
	p50, p99 := med(func(h hops) int64 { return h.cqA - h.postA })
	b.ReportMetric(p50, "p50-us")
	b.ReportMetric(p99, "p99-us")
	b.ReportMetric(floor50, "floor-p50-us")
	b.ReportMetric(floor99, "floor-p99-us")
	m := func(name string, f func(h hops) int64) {
		v, _ := med(f)
		b.ReportMetric(v, name)
	}
	m("a-post-to-wire-us", func(h hops) int64 { return h.txA - h.postA })
	m("wire-us", func(h hops) int64 { return h.rxB - h.txA + h.rxA - h.txB })
	m("b-wire-to-app-us", func(h hops) int64 { return h.cqB - h.rxB })
	m("b-post-to-wire-us", func(h hops) int64 { return h.txB - h.postB })
	m("a-wire-to-app-us", func(h hops) int64 { return h.cqA - h.rxA })
	b.ReportMetric(0, "ns/op")
}

// linkFloor is the links' own round trip: one goroutine sends a small
// packet and polls until the echo comes back, another polls and echoes,
// n times, each on its own thread and yielding the CPU between empty
// polls as the engines do (a poller that never yields holds its core for
// a whole time slice whenever anything else wants it); it returns the p50
// and p99 in microseconds.
func linkFloor(x, y dataplane.Link, xAddr netip.Addr, n int) (float64, float64) {
	yAddr := netip.MustParseAddr("127.0.0.2")
	if !xAddr.IsLoopback() {
		yAddr = netip.MustParseAddr("10.9.0.2")
	}
	echo := func(l dataplane.Link, first bool, dst netip.Addr, lat []float64) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		rx, tx := make([]dataplane.RxPacket, 1), make([]dataplane.TxPacket, 1)
		send := func() {
			for l.ReserveTx(tx) == 0 {
			}
			tx[0].Len, tx[0].Dst, tx[0].SrcPort = 64, dst, 50000
			l.SubmitTx(tx)
		}
		for i := range n {
			t0 := time.Now()
			if first {
				send()
			}
			for k := 0; l.Receive(rx) == 0; k++ {
				if k >= 8 {
					unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
				}
			}
			l.Release(rx)
			if !first {
				send()
			} else {
				lat[i] = float64(time.Since(t0)) / 1e3
			}
		}
	}
	lat := make([]float64, n)
	done := make(chan struct{})
	go func() { echo(y, false, xAddr, nil); close(done) }()
	echo(x, true, yAddr, lat)
	<-done
	slices.Sort(lat)
	return lat[n/2], lat[n*99/100]
}
