package udplink

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/dataplane"
)

// TestBuildRuns checks how SubmitTx lays a batch out as sendmmsg entries:
// runs of one Dst, class and length (the last may be shorter) coalesce, and
// anything else starts a new entry.
func TestBuildRuns(t *testing.T) {
	l := openLinks(t, Config{Local: lo1, Batch: 16, GSO: true})[0]
	if gso, _ := l.Offloads(); !gso {
		t.Skip("kernel without UDP_SEGMENT")
	}
	x, y := lo2, lo3
	type pk struct {
		dst netip.Addr
		n   int
		ctl bool
	}
	pkts := []pk{
		{x, 100, false}, {x, 100, false}, {x, 100, false}, {x, 50, false}, // one run, closed by 50
		{x, 100, false},                                 // new entry: the run was closed
		{x, 200, false},                                 // longer: new entry
		{y, 200, false}, {y, 0, false}, {y, 200, false}, // Len 0 skipped, run continues
		{y, 200, true}, {y, 200, true}, // control: a run of its own
	}
	wantRuns := []int{4, 1, 1, 2, 2}
	batch := make([]dataplane.TxPacket, len(pkts))
	l.ReserveTx(batch)
	for i, p := range pkts {
		batch[i].Dst, batch[i].Len, batch[i].Control = p.dst, p.n, p.ctl
		l.tx.slots[uint32(batch[i].Handle)].ok = p.n > 0
	}
	k := l.tx.build(batch, okOrder(l, batch), true)
	if k != len(wantRuns) {
		t.Fatalf("%d entries, want %d", k, len(wantRuns))
	}
	for j, w := range wantRuns {
		if c := l.tx.ent[j].count; c != w {
			t.Errorf("entry %d: %d packets, want %d", j, c, w)
		}
	}
	if k := l.tx.build(batch, okOrder(l, batch), false); k != 10 {
		t.Errorf("without GSO: %d entries, want one per packet (10)", k)
	}
	// Give the slots back without sending.
	for i := range batch {
		batch[i].Len = 0
	}
	l.SubmitTx(batch)

	// A run stops at maxGSOSegments and at the largest datagram.
	big := openLinks(t, Config{Local: lo1, Batch: 200, MaxPayload: 1400, GSO: true})[0]
	batch = make([]dataplane.TxPacket, 200)
	big.ReserveTx(batch)
	for i := range batch {
		batch[i].Dst, batch[i].Len = x, 1000
		big.tx.slots[uint32(batch[i].Handle)].ok = true
	}
	k = big.tx.build(batch, okOrder(big, batch), true)
	for j := range k {
		if e := big.tx.ent[j]; e.count > maxGSOSegments || e.bytes > maxDatagram4 {
			t.Errorf("entry %d: %d packets, %d bytes", j, e.count, e.bytes)
		}
	}
	if k != 4 { // 64 + 64 + 64 + 8
		t.Errorf("%d entries for 200 packets, want 4", k)
	}
}

// okOrder is the indexes of batch's packets marked to be sent, in order:
// what SubmitTx hands build for a link with one socket.
func okOrder(l *Link, batch []dataplane.TxPacket) []int32 {
	var o []int32
	for i := range batch {
		if l.tx.slots[uint32(batch[i].Handle)].ok {
			o = append(o, int32(i))
		}
	}
	return o
}

// TestGSOToGRO: a GSO sender and a GRO receiver over loopback. The kernel
// hands the GSO run to the GRO socket whole, and Receive must split it back
// into the packets that were sent, also when the caller's batch is smaller
// than the run (the rest waits for the next Receive, and Poll does not
// block meanwhile).
func TestGSOToGRO(t *testing.T) {
	ls := openLinks(t, Config{Local: lo1, GSO: true}, Config{Local: lo2, GSO: true}, Config{Local: lo3})
	a, b, c := ls[0], ls[1], ls[2]
	if gso, _ := a.Offloads(); !gso {
		t.Skip("kernel without UDP_SEGMENT")
	}
	if _, gro := b.Offloads(); !gro {
		t.Skip("kernel without UDP_GRO")
	}
	// 40 full packets and a short one close the run.
	length := func(s uint32) int {
		if s%41 == 40 {
			return 333
		}
		return 1400
	}
	for _, bs := range []int{64, 7, 1} {
		b0, a0 := b.Counters(), a.Counters()
		sendBatch(t, a, lo2, 0, 41, length)
		if d := a.Counters().SentGSO - a0.SentGSO; d != 1 {
			t.Fatalf("41 packets to one peer went out as %d GSO runs, want 1", d)
		}
		pkts := recvSplit(t, b, 41, bs)
		checkSeq(t, pkts, 0, lo1, length)
		d := b.Counters()
		if d.RecvGRO == b0.RecvGRO {
			t.Fatalf("batch %d: no coalesced datagram arrived (counters %+v)", bs, d)
		}
		t.Logf("batch %d: %d packets from %d coalesced datagrams", bs, d.Received-b0.Received, d.RecvGRO-b0.RecvGRO)
	}

	// A receiver without GRO gets the run as separate datagrams: the kernel
	// segments it for a socket that did not ask for coalescing.
	sendBatch(t, a, lo3, 0, 41, length)
	checkSeq(t, recvN(t, c, 41, 64), 0, lo1, length)
	if d := c.Counters(); d.RecvGRO != 0 {
		t.Fatalf("GRO off, yet %d coalesced datagrams", d.RecvGRO)
	}
}

// recvSplit is recvN that also checks that Poll returns at once while the
// segments of a coalesced datagram wait to be handed out.
func recvSplit(t *testing.T, l *Link, n, bs int) []got {
	var out []got
	batch := make([]dataplane.RxPacket, bs)
	for idle := 0; len(out) < n; {
		k := l.Receive(batch)
		if k == 0 {
			if idle++; idle > 50 {
				t.Fatalf("received %d packets, want %d", len(out), n)
			}
			if err := l.Poll(100 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, p := range batch[:k] {
			out = append(out, got{append([]byte(nil), p.Payload...), p.From, p.CE})
		}
		// Hold the packets across the next Poll: with segments pending and
		// nothing else coming, it must return at once (if it blocked, this
		// test would hang until go test's timeout, not pass).
		if l.rx.pending() {
			if err := l.Poll(-1); err != nil {
				t.Fatal(err)
			}
		}
		l.Release(batch[:k])
	}
	return out
}

// TestGROOversize: with GRO the slot is 64 KiB, so a datagram over
// MaxPayload is not truncated by the kernel; Receive drops a coalesced
// datagram whose segments are over MaxPayload too.
func TestGROOversize(t *testing.T) {
	ls := openLinks(t, Config{Local: lo1, GSO: true, MaxPayload: 2000}, Config{Local: lo2, GSO: true, MaxPayload: 1000})
	a, b := ls[0], ls[1]
	if _, gro := b.Offloads(); !gro {
		t.Skip("kernel without UDP_GRO")
	}
	sendBatch(t, a, lo2, 0, 10, func(uint32) int { return 1500 })
	sendBatch(t, a, lo2, 10, 1, func(uint32) int { return 900 })
	checkSeq(t, recvN(t, b, 1, 8), 10, lo1, func(uint32) int { return 900 })
	if c := b.Counters(); c.Truncated != 10 || c.Received != 1 {
		t.Fatalf("counters %+v, want 10 truncated, 1 received", c)
	}
}

// TestSendRefused: the kernel refuses some entries of a batch (a broadcast
// destination without SO_BROADCAST: EACCES, before anything leaves the
// host). sendmmsg stops at a refused entry; SubmitTx counts it and sends the
// rest, and a refused GSO run is retried packet by packet (GSO stays on:
// only EIO turns it off).
func TestSendRefused(t *testing.T) {
	bcast := netip.MustParseAddr("127.255.255.255")
	for _, gso := range []bool{false, true} {
		t.Run(onOff(gso), func(t *testing.T) {
			ls := openLinks(t, Config{Local: lo1, GSO: gso}, Config{Local: lo2})
			a, b := ls[0], ls[1]
			batch := make([]dataplane.TxPacket, 9)
			a.ReserveTx(batch)
			for i := range batch {
				batch[i].Dst, batch[i].Len = lo2, 100
				if i/3 == 1 {
					batch[i].Dst = bcast
				}
				fill(batch[i].Buf[:100], uint32(i))
			}
			if err := a.SubmitTx(batch); err != nil {
				t.Fatal(err)
			}
			c := a.Counters()
			if c.Sent != 6 || c.SendErrors != 3 {
				t.Fatalf("counters %+v, want 6 sent, 3 errors", c)
			}
			pkts := recvN(t, b, 6, 16)
			for i, seq := range []uint32{0, 1, 2, 6, 7, 8} {
				checkSeq(t, pkts[i:i+1], seq, lo1, func(uint32) int { return 100 })
			}
			if g, _ := a.Offloads(); g != gso {
				t.Fatalf("GSO %v after EACCES, want %v", g, gso)
			}
			t.Logf("%d sendmmsg calls, %d GSO runs", c.SendCalls, c.SentGSO)
		})
	}
}

// TestGSOLimits sends full batches of the largest packets, so that runs end
// at the largest datagram (IPv4 and IPv6 differ) and at maxGSOSegments; the
// kernel must take every one.
func TestGSOLimits(t *testing.T) {
	for _, tc := range []struct {
		local netip.Addr
		size  int
	}{{lo1, 1400}, {lo6, 1400}, {lo1, 1000}, {lo6, 1023}, {lo1, 64}, {lo1, 5039}, {lo6, 9361}} {
		t.Run(fmt.Sprintf("%s/%d", tc.local, tc.size), func(t *testing.T) {
			cfg := Config{Local: tc.local, GSO: true, MaxPayload: tc.size, Batch: 200}
			l := openLinks(t, cfg)[0]
			if g, _ := l.Offloads(); !g {
				t.Skip("kernel without UDP_SEGMENT")
			}
			length := func(uint32) int { return tc.size }
			sendBatch(t, l, tc.local, 0, 200, length)
			if c := l.Counters(); c.Sent != 200 || c.SendErrors != 0 || c.SendCalls != 1 {
				t.Fatalf("counters %+v, want 200 sent in one call", c)
			}
			checkSeq(t, recvN(t, l, 200, 200), 0, tc.local, length)
		})
	}
}
