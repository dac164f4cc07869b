package transport_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// TestStreamsNoHeadOfLineBlocking (§9.1): every packet of stream 1 is
// blackholed for the first 500 us. Stream 0's messages, posted after
// stream 1's, complete during the outage, and stream 1's complete after it
// in posting order.
func TestStreamsNoHeadOfLineBlocking(t *testing.T) {
	link := sim.DefaultLink
	const outageEnd = 500 * time.Microsecond
	link.Drop = dropIf(func(now sim.Time, d wire.Data) bool {
		return d.Stream() == 1 && now < sim.Time(outageEnd)
	})
	// Without congestion control: a blackhole that takes one stream's
	// packets and no other's exists only in this test, and under a
	// congestion window that stream's retransmissions, which go first,
	// fill the window for the whole outage. What this test checks is the
	// reliability layer's independence of streams.
	p := newPair(t, transport.Config{Congestion: transport.CongestionNone}, link, 1<<20)
	p.connect()
	src := pattern(1<<20, 1)
	const n = 8
	for i := 0; i < n; i++ {
		// stream 1 first, so stream 0 is posted behind it
		for _, s := range []uint16{1, 0} {
			off := (int(s)*n + i) * 16384
			if err := p.ca.PostWrite(&transport.WorkRequest{WRID: uint64(s)<<32 | uint64(i), Stream: s,
				Local: src[off : off+16384], RemoteAddr: regionAddr + uint64(off), RKey: p.key}); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.kick()
	var done0, done1 []sim.Time
	var order1 []uint64
	p.onA = func(now sim.Time, c transport.Completion) {
		if c.Op != transport.OpWrite || c.Status != transport.StatusOK {
			return
		}
		if c.Stream == 0 {
			done0 = append(done0, now)
		} else {
			done1 = append(done1, now)
			order1 = append(order1, c.WRID&0xffffffff)
		}
	}
	p.runUntil(100*time.Millisecond, func() bool { return len(done0)+len(done1) == 2*n })
	if len(done0) != n || len(done1) != n {
		t.Fatalf("completed stream0 %d stream1 %d of %d each", len(done0), len(done1), n)
	}
	for _, at := range done0 {
		if at >= sim.Time(outageEnd) {
			t.Errorf("stream 0 completion at %v waited for stream 1's outage", time.Duration(at))
		}
	}
	for i, at := range done1 {
		if at < sim.Time(outageEnd) {
			t.Errorf("stream 1 completed at %v, during its outage", time.Duration(at))
		}
		if order1[i] != uint64(i) {
			t.Errorf("stream 1 completion %d is message %d: not posting order", i, order1[i])
		}
	}
	if !bytes.Equal(p.region[:2*n*16384], src[:2*n*16384]) {
		t.Error("region content differs from the source")
	}
}

// TestReceiveOrderWithinStream (§9.1): with loss, receive completions of
// SENDs on one stream are reported in posting order, even though their
// packets are placed in any order.
func TestReceiveOrderWithinStream(t *testing.T) {
	link := sim.DefaultLink
	link.Loss, link.Reorder = 0.05, 0.2
	p := newPair(t, transport.Config{}, link, 1<<20)
	p.connect()
	const n = 64
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, 8192)
		if err := p.cb.PostRecv(uint64(i), bufs[i]); err != nil {
			t.Fatal(err)
		}
	}
	src := pattern(n*8192, 3)
	for i := 0; i < n; i++ {
		if err := p.ca.PostSend(&transport.WorkRequest{WRID: uint64(i), Local: src[i*8192 : (i+1)*8192],
			Imm: uint32(i), HasImm: true}); err != nil {
			t.Fatal(err)
		}
	}
	p.kick()
	var got []uint32
	p.onB = func(now sim.Time, c transport.Completion) {
		if c.Op == transport.OpRecv {
			got = append(got, c.Imm)
		}
	}
	p.runUntil(time.Second, func() bool { return len(got) == n })
	if len(got) != n {
		t.Fatalf("%d of %d receives", len(got), n)
	}
	for i, imm := range got {
		if imm != uint32(i) {
			t.Fatalf("receive %d carries message %d", i, imm)
		}
		if !bytes.Equal(bufs[i], src[i*8192:(i+1)*8192]) {
			t.Fatalf("receive buffer %d differs", i)
		}
	}
}

// TestReadSeesPrecedingWrite (§9.1): a READ posted after a WRITE on the
// same stream returns the written bytes, even when the WRITE's packets
// are lost and resent after the READ request arrives.
func TestReadSeesPrecedingWrite(t *testing.T) {
	link := sim.DefaultLink
	dropped := 0
	link.Drop = dropIf(func(now sim.Time, d wire.Data) bool {
		if d.Opcode() == wire.OpWrite && d.Offset() == 0 && dropped < 3 {
			dropped++
			return true
		}
		return false
	})
	p := newPair(t, transport.Config{}, link, 1<<16)
	p.connect()
	src := pattern(32768, 9)
	back := make([]byte, 32768)
	if err := p.ca.PostWrite(&transport.WorkRequest{WRID: 1, Local: src, RemoteAddr: regionAddr, RKey: p.key}); err != nil {
		t.Fatal(err)
	}
	if err := p.ca.PostRead(&transport.WorkRequest{WRID: 2, Local: back, RemoteAddr: regionAddr, RKey: p.key}); err != nil {
		t.Fatal(err)
	}
	p.kick()
	p.runUntil(time.Second, func() bool { return count(p.cqA, transport.OpRead, transport.StatusOK) == 1 })
	if count(p.cqA, transport.OpRead, transport.StatusOK) != 1 || count(p.cqA, transport.OpWrite, transport.StatusOK) != 1 {
		t.Fatalf("completions %+v", p.cqA)
	}
	if dropped != 3 {
		t.Fatalf("dropped %d first packets, want 3", dropped)
	}
	if !bytes.Equal(back, src) {
		t.Error("READ returned data from before the WRITE")
	}
}

// TestRNRThenRecv (§9.4): SENDs with no receive buffer posted are refused
// with RNR and retried; once buffers are posted they land.
func TestRNRThenRecv(t *testing.T) {
	p := newPair(t, transport.Config{}, sim.DefaultLink, 1<<16)
	p.connect()
	src := pattern(20000, 4)
	if err := p.ca.PostSend(&transport.WorkRequest{WRID: 7, Local: src}); err != nil {
		t.Fatal(err)
	}
	p.kick()
	p.idle(200 * time.Microsecond)
	if n := p.b.EP.Stats().NacksSent[wire.NackRNR]; n == 0 {
		t.Fatal("no RNR NACK while no receive buffer is posted")
	}
	if len(p.cqA) != 1 { // only OpConnected
		t.Fatalf("completion before a buffer was posted: %+v", p.cqA)
	}
	buf := make([]byte, 32768)
	if err := p.cb.PostRecv(99, buf); err != nil {
		t.Fatal(err)
	}
	p.kick()
	p.runUntil(time.Second, func() bool { return count(p.cqA, transport.OpSend, transport.StatusOK) == 1 })
	if count(p.cqB, transport.OpRecv, transport.StatusOK) != 1 {
		t.Fatalf("receiver completions %+v", p.cqB)
	}
	var rc transport.Completion
	for _, c := range p.cqB {
		if c.Op == transport.OpRecv {
			rc = c
		}
	}
	if rc.WRID != 99 || rc.Bytes != len(src) || !bytes.Equal(buf[:len(src)], src) {
		t.Errorf("recv completion %+v, content equal %v", rc, bytes.Equal(buf[:len(src)], src))
	}
}

// TestSendLongerThanBuffer (§9.4): the message fails at both ends with a
// length error and the connection carries on.
func TestSendLongerThanBuffer(t *testing.T) {
	p := newPair(t, transport.Config{}, sim.DefaultLink, 1<<16)
	p.connect()
	small := make([]byte, 100)
	big := make([]byte, 4096)
	p.cb.PostRecv(1, small)
	p.cb.PostRecv(2, big)
	p.ca.PostSend(&transport.WorkRequest{WRID: 1, Local: pattern(1000, 1)})
	ok := pattern(1000, 2)
	p.ca.PostSend(&transport.WorkRequest{WRID: 2, Local: ok})
	p.kick()
	p.runUntil(time.Second, func() bool { return len(p.cqA) == 3 && len(p.cqB) == 3 })
	if count(p.cqA, transport.OpSend, transport.StatusRemoteInvalid) != 1 || count(p.cqA, transport.OpSend, transport.StatusOK) != 1 {
		t.Errorf("sender completions %+v", p.cqA)
	}
	if count(p.cqB, transport.OpRecv, transport.StatusLocalLength) != 1 || count(p.cqB, transport.OpRecv, transport.StatusOK) != 1 {
		t.Errorf("receiver completions %+v", p.cqB)
	}
	if !bytes.Equal(big[:1000], ok) || !bytes.Equal(small, make([]byte, 100)) {
		t.Error("buffers: the failed SEND wrote, or the good one did not")
	}
}

// TestBadKeysWriteNothing (§10): a wrong rkey, a range past the region's
// end, and a READ of a region without remote read all fail with
// REMOTE_ACCESS, write nothing, and leave the connection usable.
func TestBadKeysWriteNothing(t *testing.T) {
	link := sim.DefaultLink
	link.Loss = 0.02
	p := newPair(t, transport.Config{}, link, 1<<16)
	p.memB.Add(&transport.Region{Key: 77, Addr: 0x900000, Buf: make([]byte, 4096), Access: transport.AccessRemoteWrite})
	p.connect()
	src := pattern(30000, 5)
	back := make([]byte, 1000)
	reqs := []struct {
		read bool
		wr   transport.WorkRequest
	}{
		{false, transport.WorkRequest{WRID: 1, Local: src, RemoteAddr: regionAddr, RKey: p.key ^ 1}},
		{false, transport.WorkRequest{WRID: 2, Local: src, RemoteAddr: regionAddr + 1<<16 - 20000, RKey: p.key}},
		{true, transport.WorkRequest{WRID: 3, Local: back, RemoteAddr: 0x900000, RKey: 77}},
		{false, transport.WorkRequest{WRID: 4, Local: src[:100], RemoteAddr: regionAddr - 1, RKey: p.key}},
	}
	for _, r := range reqs {
		var err error
		if r.read {
			err = p.ca.PostRead(&r.wr)
		} else {
			err = p.ca.PostWrite(&r.wr)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	good := transport.WorkRequest{WRID: 5, Local: src[:5000], RemoteAddr: regionAddr + 100, RKey: p.key}
	p.ca.PostWrite(&good)
	p.kick()
	p.runUntil(time.Second, func() bool { return len(p.cqA) == 6 })
	if n := count(p.cqA, transport.OpWrite, transport.StatusRemoteAccess) + count(p.cqA, transport.OpRead, transport.StatusRemoteAccess); n != 4 {
		t.Errorf("%d access errors, want 4: %+v", n, p.cqA)
	}
	if count(p.cqA, transport.OpWrite, transport.StatusOK) != 1 {
		t.Errorf("the good WRITE after the bad ones did not complete: %+v", p.cqA)
	}
	want := make([]byte, len(p.region))
	copy(want[100:], src[:5000])
	if !bytes.Equal(p.region, want) {
		t.Error("a refused WRITE wrote into the region")
	}
	if p.b.EP.Stats().NacksSent[wire.NackRemoteAccess] == 0 {
		t.Error("no REMOTE_ACCESS NACK counted")
	}
}

// TestRetryLimitFailsConnection (§8.4): when the link dies, the sender
// backs off, gives up after MaxRetries timeouts, and completes everything
// outstanding with StatusRetryExceeded and a clear error.
func TestRetryLimitFailsConnection(t *testing.T) {
	cfg := transport.Config{MaxRetries: 4}
	p := newPair(t, cfg, sim.DefaultLink, 1<<20)
	p.connect()
	dead := sim.DefaultLink
	dead.Loss = 1 - 1e-12
	dead.Drop = func(sim.Time, []byte) bool { return true }
	p.ab.SetLink(dead)
	for i := 0; i < 3; i++ {
		p.ca.PostWrite(&transport.WorkRequest{WRID: uint64(i), Local: make([]byte, 10000), RemoteAddr: regionAddr, RKey: p.key})
	}
	p.kick()
	p.runUntil(10*time.Second, func() bool { return count(p.cqA, transport.OpClosed, transport.StatusRetryExceeded) == 1 })
	if count(p.cqA, transport.OpWrite, transport.StatusRetryExceeded) != 3 {
		t.Errorf("outstanding writes not failed: %+v", p.cqA)
	}
	if p.ca.State() != transport.StateFailed || p.ca.Err == nil {
		t.Fatalf("state %v err %v", p.ca.State(), p.ca.Err)
	}
	if got := p.a.EP.Stats().Timeouts; got != 5 {
		t.Errorf("%d timeouts before failing, want MaxRetries+1 = 5", got)
	}
	if err := p.ca.PostWrite(&transport.WorkRequest{Local: src1}); !errors.Is(err, transport.ErrNotEstablished) {
		t.Errorf("post on a failed connection: %v", err)
	}
}

var src1 = []byte{1}

// TestPSNWrap runs transfers across the 2^32 PSN wrap in both directions.
func TestPSNWrap(t *testing.T) {
	link := sim.DefaultLink
	link.Loss, link.Reorder = 0.03, 0.1
	p := newPair(t, transport.Config{}, link, 1<<20)
	transport.SetInitialPSN(p.a.EP, 0xffffffff-300)
	transport.SetInitialPSN(p.b.EP, 0xffffffff-10)
	p.connect()
	src := pattern(1<<20, 8)
	back := make([]byte, 1<<20)
	p.ca.PostWrite(&transport.WorkRequest{WRID: 1, Local: src, RemoteAddr: regionAddr, RKey: p.key})
	p.ca.PostRead(&transport.WorkRequest{WRID: 2, Local: back, RemoteAddr: regionAddr, RKey: p.key})
	p.kick()
	p.runUntil(time.Second, func() bool { return count(p.cqA, transport.OpRead, transport.StatusOK) == 1 })
	if !bytes.Equal(p.region, src) || !bytes.Equal(back, src) {
		t.Fatalf("data differs across the PSN wrap: %+v", p.cqA)
	}
}

// TestZeroLengthMessages: a zero-byte WRITE, READ and SEND each take one
// packet and complete.
func TestZeroLengthMessages(t *testing.T) {
	p := newPair(t, transport.Config{}, sim.DefaultLink, 1<<10)
	p.connect()
	p.cb.PostRecv(1, make([]byte, 10))
	p.ca.PostWrite(&transport.WorkRequest{WRID: 1, RemoteAddr: regionAddr, RKey: p.key, Imm: 5, HasImm: true})
	p.ca.PostRead(&transport.WorkRequest{WRID: 2, RemoteAddr: regionAddr, RKey: p.key})
	p.ca.PostSend(&transport.WorkRequest{WRID: 3})
	p.kick()
	p.runUntil(time.Second, func() bool { return len(p.cqA) == 4 && len(p.cqB) == 3 })
	for _, op := range []transport.Op{transport.OpWrite, transport.OpRead, transport.OpSend} {
		if count(p.cqA, op, transport.StatusOK) != 1 {
			t.Errorf("no %v completion: %+v", op, p.cqA)
		}
	}
	if count(p.cqB, transport.OpRecvWriteImm, transport.StatusOK) != 1 || count(p.cqB, transport.OpRecv, transport.StatusOK) != 1 {
		t.Errorf("receiver: %+v", p.cqB)
	}
}

// dropNacks drops every other NACK on a link: refused packets must never
// look delivered when their NACK is lost (§6.3).
func dropNacks() func(sim.Time, []byte) bool {
	n := 0
	return func(_ sim.Time, pkt []byte) bool {
		p, err := wire.Parse(pkt)
		if err == nil && p.Class == wire.ClassNack {
			n++
			return n%2 == 1
		}
		return false
	}
}

// TestLostNacksCannotFakeSuccess: with half the NACKs lost, a WRITE with a
// bad key still fails, an RNR'd SEND still lands only once a buffer is
// posted, and the connection stays healthy for what follows.
func TestLostNacksCannotFakeSuccess(t *testing.T) {
	link := sim.DefaultLink
	p := newPair(t, transport.Config{}, link, 1<<16)
	back := sim.DefaultLink
	back.Drop = dropNacks()
	p.ba.SetLink(back)
	p.connect()
	src := pattern(40000, 6)
	p.ca.PostWrite(&transport.WorkRequest{WRID: 1, Local: src, RemoteAddr: regionAddr, RKey: p.key + 1})
	p.ca.PostSend(&transport.WorkRequest{WRID: 2, Local: src[:3000], Stream: 1})
	p.kick()
	p.runUntil(time.Second, func() bool { return count(p.cqA, transport.OpWrite, transport.StatusRemoteAccess) == 1 })
	p.idle(300 * time.Microsecond)
	if count(p.cqA, transport.OpWrite, transport.StatusRemoteAccess) != 1 {
		t.Fatalf("bad-key WRITE: %+v", p.cqA)
	}
	if count(p.cqA, transport.OpSend, transport.StatusOK) != 0 {
		t.Fatal("SEND completed before any receive buffer was posted")
	}
	buf := make([]byte, 4096)
	p.cb.PostRecv(9, buf)
	p.kick()
	p.runUntil(time.Second, func() bool { return count(p.cqA, transport.OpSend, transport.StatusOK) == 1 })
	if count(p.cqB, transport.OpRecv, transport.StatusOK) != 1 || !bytes.Equal(buf[:3000], src[:3000]) {
		t.Fatalf("SEND not delivered: A %+v B %+v", p.cqA, p.cqB)
	}
	for _, b := range p.region {
		if b != 0 {
			t.Fatal("the bad-key WRITE wrote")
		}
	}
	good := transport.WorkRequest{WRID: 3, Local: src, RemoteAddr: regionAddr, RKey: p.key}
	p.ca.PostWrite(&good)
	p.kick()
	p.runUntil(time.Second, func() bool { return count(p.cqA, transport.OpWrite, transport.StatusOK) == 1 })
	if !bytes.Equal(p.region[:len(src)], src) {
		t.Fatal("the connection did not recover for a good WRITE")
	}
	if p.a.EP.Stats().VoidSent == 0 {
		t.Error("no VOID packets sent for the failed WRITE")
	}
}

// TestRejectedMessageDoesNotWedgeStream (§9.5): a large WRITE that fails
// on its key is followed on the same stream by a SEND that completes at
// both ends.
func TestRejectedMessageDoesNotWedgeStream(t *testing.T) {
	p := newPair(t, transport.Config{}, sim.DefaultLink, 1<<16)
	p.connect()
	buf := make([]byte, 100)
	p.cb.PostRecv(1, buf)
	p.ca.PostWrite(&transport.WorkRequest{WRID: 1, Local: make([]byte, 2<<20), RemoteAddr: regionAddr, RKey: 999})
	p.ca.PostSend(&transport.WorkRequest{WRID: 2, Local: []byte("after")})
	p.kick()
	p.runUntil(time.Second, func() bool {
		return count(p.cqA, transport.OpSend, transport.StatusOK) == 1 && count(p.cqB, transport.OpRecv, transport.StatusOK) == 1
	})
	if count(p.cqA, transport.OpWrite, transport.StatusRemoteAccess) != 1 || count(p.cqB, transport.OpRecv, transport.StatusOK) != 1 {
		t.Fatalf("A %+v B %+v", p.cqA, p.cqB)
	}
	if sent := p.a.EP.Stats().DataSent; sent > 100 {
		t.Errorf("%d data packets for a 2 MiB WRITE that failed on its first: the sender kept cutting it", sent)
	}
}

// TestTailLossProbe (§8.4): a single-packet WRITE whose only packet is
// lost completes after a probe timeout of about two RTTs, not after the
// 200 us minimum RTO.
func TestTailLossProbe(t *testing.T) {
	dropped := false
	link := sim.DefaultLink
	link.Drop = dropIf(func(now sim.Time, d wire.Data) bool {
		if d.Opcode() == wire.OpWrite && d.MsgID() == 5 && !dropped {
			dropped = true
			return true
		}
		return false
	})
	p := newPair(t, transport.Config{}, link, 1<<16)
	p.connect()
	// One at a time, so each ends in a tail.
	posted, done := p.writesInTurn(8, pattern(100, 2))
	if !dropped {
		t.Fatal("the drop did not happen")
	}
	if took := time.Duration(done[5] - posted[5]); took >= transport.Defaults.MinRTO {
		t.Errorf("tail loss recovered after %v, not before the %v minimum RTO", took, transport.Defaults.MinRTO)
	}
	if p.a.EP.Stats().TailProbes == 0 || p.a.EP.Stats().Timeouts != 0 {
		t.Errorf("tail probes %d, timeouts %d", p.a.EP.Stats().TailProbes, p.a.EP.Stats().Timeouts)
	}
}

// TestMismatchedPacketFailsMessage (§4.1.2, §9.1): a packet whose MsgLen
// differs from its message's first is refused with INVALID_REQUEST, and
// the receiver's message fails with it, so the SEND behind it on the same
// stream still takes effect (this was §14 K16: the stream stalled).
func TestMismatchedPacketFailsMessage(t *testing.T) {
	link := sim.DefaultLink
	tampered := false
	link.Drop = func(_ sim.Time, pkt []byte) bool {
		p, err := wire.Parse(pkt)
		if err != nil || tampered || p.Class != wire.ClassData || p.Data().Opcode() != wire.OpWriteImm || p.Data().Offset() == 0 {
			return false
		}
		tampered = true
		binary.BigEndian.PutUint32(pkt[32:], p.Data().MsgLen()+1) // MsgLen (§4.1)
		wire.Seal(pkt)
		return false
	}
	p := newPair(t, transport.Config{}, link, 1<<16)
	p.connect()
	p.cb.PostRecv(1, make([]byte, 100))
	p.ca.PostWrite(&transport.WorkRequest{WRID: 1, Local: make([]byte, 3000), RemoteAddr: regionAddr, RKey: p.key, Imm: 7, HasImm: true})
	p.ca.PostSend(&transport.WorkRequest{WRID: 2, Local: []byte("after")})
	p.kick()
	p.runUntil(time.Second, func() bool {
		return count(p.cqB, transport.OpRecv, transport.StatusOK) == 1 && count(p.cqA, transport.OpSend, transport.StatusOK) == 1
	})
	if !tampered || count(p.cqA, transport.OpWrite, transport.StatusRemoteInvalid) != 1 ||
		count(p.cqB, transport.OpRecvWriteImm, transport.StatusOK) != 0 || count(p.cqB, transport.OpRecv, transport.StatusOK) != 1 {
		t.Fatalf("tampered %v; A %+v B %+v", tampered, p.cqA, p.cqB)
	}
}

// TestTailLossProbeSprayedTail: the last two packets of a four-packet
// message, on two different paths, are lost. The probe resends the first
// of them; its ack speaks only for its own path, but the other lost packet
// is overdue on its path (sent with packets acked on other paths, §8.7.4)
// and is resent too: the message completes well inside MinRTO, with one
// probe and no timeout.
func TestTailLossProbeSprayedTail(t *testing.T) {
	link := sim.DefaultLink
	var lostPaths []uint16
	var mp int
	link.Drop = dropIf(func(now sim.Time, d wire.Data) bool {
		if d.Opcode() == wire.OpWrite && d.MsgID() == 1 && d.Flags()&wire.FlagRetx == 0 && int(d.Offset()) >= 2*mp {
			lostPaths = append(lostPaths, d.PathID())
			return true
		}
		return false
	})
	p := newPair(t, transport.Config{Paths: 4}, link, 1<<16)
	p.connect()
	mp = p.ca.MaxPayload()
	// Message 0 times the connection; message 1 loses its tail.
	posted, done := p.writesInTurn(2, pattern(4*mp, 3))
	if len(lostPaths) != 2 || lostPaths[0] == lostPaths[1] {
		t.Fatalf("lost the tail on paths %v, want two different paths", lostPaths)
	}
	st := p.a.EP.Stats()
	if took := time.Duration(done[1] - posted[1]); took >= transport.Defaults.MinRTO || st.Timeouts != 0 || st.TailProbes != 1 {
		t.Errorf("sprayed tail recovered after %v (MinRTO %v), %d timeouts, %d probes", took, transport.Defaults.MinRTO, st.Timeouts, st.TailProbes)
	}
}
