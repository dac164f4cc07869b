package transport_test

import (
	"net/netip"
	"testing"

	"github.com/metaroce/metaroce/transport"
)

// loop connects two endpoints back to back in memory, with no simulator:
// A writes 64 KiB messages to B, packets move in batches of up to 256, and
// the clock advances 100 ns per packet. The benchmarks time one side per
// batch, so ns/op is that side's cost per data packet.
type loop struct {
	a, b     *transport.Endpoint
	ca       *transport.Conn
	now      transport.Time
	data     [][]byte
	dataLen  []int
	acks     [][]byte
	ackLen   []int
	nd, na   int
	src      []byte
	sgl      [][]byte // if set, A's WRITEs gather from these instead of src
	cqes     []transport.Completion
	key      uint32
	inflight int
}

func newLoop(tb testing.TB) *loop { return newLoopMTU(tb, 0) }

// newLoopMTU is newLoop at an MTU (0: the default).
func newLoopMTU(tb testing.TB, mtu int) *loop {
	// The loop has no clock (every call at time 0), so no pacer: it
	// exercises the packet path, not a congestion controller.
	cfg := transport.Config{Seed: 1, MTU: mtu, Congestion: transport.CongestionNone}
	a, err := transport.NewEndpoint(cfg, netip.MustParseAddr("10.0.0.1"))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Seed = 2
	b, _ := transport.NewEndpoint(cfg, netip.MustParseAddr("10.0.0.2"))
	mem := transport.NewMemoryTable()
	mem.Add(&transport.Region{Key: 3, Addr: 0, Buf: make([]byte, 1<<20), Access: transport.AccessRemoteWrite})
	b.Listen(1, mem)
	l := &loop{a: a, b: b, key: 3, src: make([]byte, 65536), cqes: make([]transport.Completion, 64)}
	for i := 0; i < 256; i++ {
		l.data = append(l.data, make([]byte, a.MaxPacket()))
		l.acks = append(l.acks, make([]byte, a.MaxPacket()))
	}
	l.dataLen, l.ackLen = make([]int, 256), make([]int, 256)
	if _, err := a.Connect(0, addrB, 1, transport.NewMemoryTable()); err != nil {
		tb.Fatal(err)
	}
	for l.ca == nil {
		l.sendSide()
		l.recvSide()
	}
	return l
}

// sendSide is A's work: take B's acks, report completions (reposting),
// and cut up to a batch of data packets.
func (l *loop) sendSide() {
	for i := 0; i < l.na; i++ {
		l.a.Receive(l.now, addrB, false, l.acks[i][:l.ackLen[i]])
	}
	l.na = 0
	for {
		n := l.a.PollCompletions(l.cqes)
		if n == 0 {
			break
		}
		for _, c := range l.cqes[:n] {
			switch c.Op {
			case transport.OpConnected:
				l.ca = c.Conn
			case transport.OpWrite:
				l.inflight--
			}
		}
	}
	for l.ca != nil && l.inflight < 8 {
		if err := l.ca.PostWrite(&transport.WorkRequest{Local: l.src, SGL: l.sgl, RKey: l.key, Stream: uint16(l.inflight % 4)}); err != nil {
			break
		}
		l.inflight++
	}
	l.a.Timeout(l.now)
	l.nd = 0
	for l.nd < len(l.data) {
		d, ok := l.a.Transmit(l.now, l.data[l.nd])
		if !ok {
			break
		}
		l.dataLen[l.nd] = d.Len
		l.nd++
		l.now += 100
	}
}

// recvSide is B's work: place the batch and produce its acks.
func (l *loop) recvSide() {
	for i := 0; i < l.nd; i++ {
		l.b.Receive(l.now, addrA, false, l.data[i][:l.dataLen[i]])
	}
	l.b.Timeout(l.now)
	l.na = 0
	for l.na < len(l.acks) {
		d, ok := l.b.Transmit(l.now, l.acks[l.na])
		if !ok {
			break
		}
		l.ackLen[l.na] = d.Len
		l.na++
	}
	l.now += 1000
}

var (
	addrA = netip.MustParseAddr("10.0.0.1")
	addrB = netip.MustParseAddr("10.0.0.2")
)

// BenchmarkEngineSend: sender cost per data packet (segmentation, header,
// payload copy, CRC32C, path choice, ack processing, completions).
func BenchmarkEngineSend(b *testing.B) { benchSide(b, true) }

// BenchmarkEngineReceive: receiver cost per data packet (CRC check, parse,
// window, key check, placement copy, ack generation).
func BenchmarkEngineReceive(b *testing.B) { benchSide(b, false) }

func benchSide(b *testing.B, send bool) { benchSideMTU(b, send, 0) }

func benchSideMTU(b *testing.B, send bool, mtu int) {
	l := newLoopMTU(b, mtu)
	for i := 0; i < 100; i++ { // reach steady state
		l.sendSide()
		l.recvSide()
	}
	b.ReportAllocs()
	b.SetBytes(int64(l.ca.MaxPayload()))
	b.ResetTimer()
	done := 0
	for done < b.N {
		if !send {
			b.StopTimer()
		}
		l.sendSide()
		if send {
			b.StopTimer()
		} else {
			b.StartTimer()
		}
		l.recvSide()
		if !send {
			b.StopTimer()
		}
		b.StartTimer()
		if l.nd == 0 {
			b.Fatal("no progress")
		}
		done += l.nd
	}
	b.StopTimer()
}
