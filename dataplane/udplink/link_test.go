package udplink

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/dataplane"
)

// TestExchangeIPv4: two links on 127.0.0.1 and 127.0.0.2, one port, send
// each other 1000 packets of every length in batches; every byte compared.
func TestExchangeIPv4(t *testing.T) {
	for _, gso := range []bool{false, true} {
		t.Run(onOff(gso), func(t *testing.T) {
			ls := openLinks(t, Config{Local: lo1, GSO: gso}, Config{Local: lo2, GSO: gso})
			exchange(t, ls[0], ls[1], 1000)
			exchange(t, ls[1], ls[0], 1000)
		})
	}
}

// TestExchangeIPv6 sends a link's packets to itself over ::1 (the only IPv6
// loopback address; Port is both the bound and the destination port, so two
// links on ::1 cannot talk).
func TestExchangeIPv6(t *testing.T) {
	for _, gso := range []bool{false, true} {
		t.Run(onOff(gso), func(t *testing.T) {
			l := openLinks(t, Config{Local: lo6, GSO: gso})[0]
			exchange(t, l, l, 1000)
		})
	}
}

func exchange(t *testing.T, from, to *Link, n int) {
	t.Helper()
	max := from.Config().MaxPayload
	length := func(s uint32) int { return pktLen(s, max) }
	bs := from.Config().Batch
	c0 := from.Counters()
	for seq := 0; seq < n; seq += bs {
		k := min(bs, n-seq)
		sendBatch(t, from, to.LocalAddr().Addr(), uint32(seq), k, length)
		checkSeq(t, recvN(t, to, k, bs), uint32(seq), from.LocalAddr().Addr(), length)
	}
	if c := from.Counters(); c.Sent-c0.Sent != uint64(n) || c.SendErrors != 0 {
		t.Fatalf("counters %+v, want %d more sent and no errors", c, n)
	}
}

// TestOneSyscallPerBatch: a batch of 64 is one sendmmsg, and each Receive
// makes at most one recvmmsg, which takes several datagrams at once.
func TestOneSyscallPerBatch(t *testing.T) {
	ls := openLinks(t, Config{Local: lo1}, Config{Local: lo2})
	a, b := ls[0], ls[1]
	length := func(uint32) int { return 100 }
	best := 0
	for round := range 5 {
		ca, cb := a.Counters(), b.Counters()
		sendBatch(t, a, lo2, uint32(round*64), 64, length)
		if d := a.Counters().SendCalls - ca.SendCalls; d != 1 {
			t.Fatalf("64 packets took %d sendmmsg calls, want 1", d)
		}
		batch := make([]dataplane.RxPacket, 64)
		calls, got := 0, 0
		for got < 64 {
			if err := b.Poll(-1); err != nil {
				t.Fatal(err)
			}
			k := b.Receive(batch)
			calls++
			got += k
			best = max(best, k)
			b.Release(batch[:k])
		}
		if d := b.Counters().RecvCalls - cb.RecvCalls; d > uint64(calls) {
			t.Fatalf("%d Receive calls made %d recvmmsg calls", calls, d)
		}
	}
	// Loopback delivers inside the sender's syscall, so the whole batch is
	// normally queued by the time Receive runs; at least one round must
	// have moved more than one datagram in a call.
	if best < 2 {
		t.Fatalf("no recvmmsg returned more than one datagram")
	}
	t.Logf("largest recvmmsg: %d datagrams", best)
}

// TestTruncated: a datagram longer than MaxPayload is dropped and counted,
// with and without GRO (where it fits the 64 KiB slot and Receive drops it).
func TestTruncated(t *testing.T) {
	for _, gso := range []bool{false, true} {
		t.Run(onOff(gso), func(t *testing.T) {
			b := openLinks(t, Config{Local: lo2, MaxPayload: 1000, GSO: gso})[0]
			fd := plainSocket(t, lo3, b.Config().Port)
			sendTOS(t, fd, b.LocalAddr(), make([]byte, 1001), 0)
			sendTOS(t, fd, b.LocalAddr(), make([]byte, 9000), 0)
			sendTOS(t, fd, b.LocalAddr(), want(7, 1000), 0)
			pkts := recvN(t, b, 1, 8)
			checkSeq(t, pkts, 7, lo3, func(uint32) int { return 1000 })
			if c := b.Counters(); c.Truncated != 2 || c.Received != 1 {
				t.Fatalf("counters %+v, want 2 truncated and 1 received", c)
			}
		})
	}
}

// TestBadTx: packets with a wrong-family Dst or a Len over MaxPayload are
// counted and not sent; Len 0 gives the buffer back; every slot returns.
func TestBadTx(t *testing.T) {
	ls := openLinks(t, Config{Local: lo1, Batch: 8}, Config{Local: lo2, Batch: 8})
	a, b := ls[0], ls[1]
	batch := make([]dataplane.TxPacket, 8)
	if n := a.ReserveTx(batch); n != 8 {
		t.Fatalf("ReserveTx = %d", n)
	}
	if n := a.ReserveTx(make([]dataplane.TxPacket, 1)); n != 0 {
		t.Fatalf("ReserveTx with every slot out = %d, want 0", n)
	}
	for i := range batch {
		batch[i].Dst, batch[i].Len = lo2, 10
		fill(batch[i].Buf[:10], uint32(i))
	}
	batch[1].Dst = lo6
	batch[2].Len = a.Config().MaxPayload + 1
	batch[3].Len = 0
	batch[4].Dst = netip.AddrFrom16(lo2.As16()) // IPv4-mapped: fine
	batch[5].Dst = netip.Addr{}
	if err := a.SubmitTx(batch); err != nil {
		t.Fatal(err)
	}
	if c := a.Counters(); c.Sent != 4 || c.SendErrors != 3 {
		t.Fatalf("counters %+v, want 4 sent and 3 errors", c)
	}
	pkts := recvN(t, b, 4, 8)
	for i, seq := range []uint32{0, 4, 6, 7} {
		checkSeq(t, pkts[i:i+1], seq, lo1, func(uint32) int { return 10 })
	}
	if n := a.ReserveTx(batch); n != 8 {
		t.Fatalf("ReserveTx after SubmitTx = %d, want every slot back", n)
	}
}

// TestOwnership: Receive never reuses a slot the engine holds; payloads of
// held packets survive later traffic; double release and submit panic.
func TestOwnership(t *testing.T) {
	ls := openLinks(t, Config{Local: lo1, Batch: 4}, Config{Local: lo2, Batch: 4})
	a, b := ls[0], ls[1]
	length := func(uint32) int { return 200 }
	// 2*Batch slots: hold 8 packets, then 4 more are queued and must wait.
	var held []dataplane.RxPacket
	for seq := uint32(0); seq < 8; seq += 4 {
		sendBatch(t, a, lo2, seq, 4, length)
		batch := make([]dataplane.RxPacket, 4)
		for n := 0; n < 4; {
			b.Poll(-1)
			k := b.Receive(batch[n:])
			n += k
		}
		held = append(held, batch...)
	}
	sendBatch(t, a, lo2, 8, 4, length)
	if k := b.Receive(make([]dataplane.RxPacket, 4)); k != 0 {
		t.Fatalf("Receive with every slot held = %d, want 0", k)
	}
	for i, p := range held {
		checkSeq(t, []got{{p.Payload, p.From, p.CE}}, uint32(i), lo1, length)
	}
	b.Release(held[:4])
	checkSeq(t, recvN(t, b, 4, 4), 8, lo1, length)
	for i, p := range held[4:] {
		checkSeq(t, []got{{p.Payload, p.From, p.CE}}, uint32(4+i), lo1, length)
	}
	b.Release(held[4:])

	mustPanic(t, "double release", func() { b.Release(held[:1]) })
	mustPanic(t, "zero handle", func() { b.Release(make([]dataplane.RxPacket, 1)) })
	tx := make([]dataplane.TxPacket, 1)
	a.ReserveTx(tx)
	tx[0].Len = 0
	a.SubmitTx(tx)
	mustPanic(t, "double submit", func() { a.SubmitTx(tx) })
	mustPanic(t, "receive handle submitted", func() {
		a.SubmitTx([]dataplane.TxPacket{{Handle: held[0].Handle}})
	})
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s did not panic", what)
		}
	}()
	f()
}

// TestClosed: a closed link receives nothing and says so on send and poll.
func TestClosed(t *testing.T) {
	l := openLinks(t, Config{Local: lo1})[0]
	tx := make([]dataplane.TxPacket, 1)
	l.ReserveTx(tx)
	tx[0].Len, tx[0].Dst = 10, lo2
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.SubmitTx(tx); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("SubmitTx on a closed link: %v", err)
	}
	if err := l.Poll(0); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Poll on a closed link: %v", err)
	}
	if k := l.Receive(make([]dataplane.RxPacket, 4)); k != 0 {
		t.Fatalf("Receive on a closed link = %d", k)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestInfo(t *testing.T) {
	l := openLinks(t, Config{Local: lo1})[0]
	in := l.Info()
	if in.Backend != "udp" || in.Iface != "lo" || !strings.Contains(in.Why, "no path entropy") {
		t.Fatalf("info %+v", in)
	}
	t.Log(in.Why)
}

func TestConfig(t *testing.T) {
	c, err := Config{Local: netip.AddrFrom16(lo1.As16())}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if c.Local != lo1 || c.Port != 4792 || c.Batch != 64 || c.MaxPayload != 1452 ||
		c.DSCPData != 26 || c.DSCPControl != 48 {
		t.Fatalf("defaults %+v", c)
	}
	for _, bad := range []Config{
		{},
		{Local: lo1, Batch: 1025},
		{Local: lo1, Batch: -1},
		{Local: lo1, MaxPayload: 65508},
		{Local: lo6, MaxPayload: 65528},
		{Local: lo1, DSCPData: 64},
	} {
		if _, err := bad.resolve(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if _, err := (Config{Local: lo6, MaxPayload: 65527}).resolve(); err != nil {
		t.Error(err)
	}
}
