package transport

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/metaroce/metaroce/wire"
)

// The liveness findings of issue 22: each test is a scenario in which the
// transport used to stop making progress (or to report a completion
// twice) with nothing wrong but loss, a peer that gave up, or a forged
// packet.

func parse(pkt []byte) (wire.Packet, bool) {
	p, err := wire.Parse(pkt)
	return p, err == nil
}

func isData(pkt []byte, op wire.Opcode) bool {
	p, ok := parse(pkt)
	return ok && p.Class == wire.ClassData && p.Data().Opcode() == op
}

// TestReadResponderGivesUp (finding 11): the responder's READ_RESPs are
// all lost until it fails on its retry limit and forgets the connection.
// The requester's READ_REQ was acknowledged, so nothing of its own is in
// flight; it must still find out, within its own retry budget, rather
// than wait for the response forever.
func TestReadResponderGivesUp(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(map[bool]string{false: "same-budget", true: "responder-fails-early"}[early], func(t *testing.T) {
			readResponderGivesUp(t, early)
		})
	}
}

// readResponderGivesUp: with early, the responder's retry limit is 3, so
// it forgets the connection long before the requester's budget runs
// out, and the requester's keepalive PROBE draws the RESET that ends it.
func readResponderGivesUp(t *testing.T, early bool) {
	l := newTLink(t, Config{}, 1<<20)
	if early {
		l.eps[1].cfg.MaxRetries = 3
	}
	l.connect()
	l.filter = func(from int, pkt []byte) (bool, Duration) {
		return from == 1 && isData(pkt, wire.OpReadResp), 0
	}
	dst := make([]byte, 64<<10)
	if err := l.conns[0].PostRead(&WorkRequest{WRID: 1, Local: dst, RemoteAddr: regionBase, RKey: regionKey}); err != nil {
		t.Fatal(err)
	}
	var bFailed Time
	l.run(Time(10*time.Second), func() bool {
		if bFailed == 0 && l.done(1, OpClosed) > 0 {
			bFailed = l.now
		}
		return l.done(0, OpRead) == 1
	})
	if bFailed == 0 {
		t.Fatalf("the responder did not fail (state %v)", l.conns[1].State())
	}
	if l.done(0, OpRead) != 1 {
		t.Fatalf("READ still outstanding %v after the responder failed (requester %v)",
			time.Duration(l.now-bFailed), l.conns[0].State())
	}
	if l.completions(0, OpRead, StatusOK) != 0 {
		t.Fatal("READ completed successfully without its response")
	}
	t.Logf("responder failed at %v; requester's READ completed %v later (%v), conn %v",
		time.Duration(bFailed), time.Duration(l.now-bFailed), l.cq[0][len(l.cq[0])-1].Status, l.conns[0].State())
	if l.now-bFailed > Time(time.Second) {
		t.Errorf("requester took %v after the responder failed", time.Duration(l.now-bFailed))
	}
	if early && l.completions(0, OpRead, StatusReset) != 1 {
		t.Errorf("READ completed %v, want reset (the keepalive's RESET)", l.cq[0])
	}
}

// TestRoCEv2SequenceNackLoss (finding 12): the go-back-N baseline under
// ordinary random loss. Every SEQUENCE NACK marks the window lost; the
// path ring must free those slots or nothing can be resent.
func TestRoCEv2SequenceNackLoss(t *testing.T) {
	l := newTLink(t, Config{Mode: ModeRoCEv2}, 1<<20)
	l.connect()
	rng := rand.New(rand.NewPCG(12, 12))
	l.filter = func(from int, pkt []byte) (bool, Duration) {
		p, ok := parse(pkt)
		return ok && p.Class == wire.ClassData && rng.IntN(100) < 3, 0
	}
	src := make([]byte, 64<<10)
	const n = 20
	for i := range n {
		if err := l.conns[0].PostWrite(&WorkRequest{WRID: uint64(i), Local: src, RemoteAddr: regionBase, RKey: regionKey}); err != nil {
			t.Fatal(err)
		}
	}
	l.run(Time(5*time.Second), func() bool { return l.done(0, OpWrite) == n })
	if got := l.completions(0, OpWrite, StatusOK); got != n {
		p := &l.conns[0].snd.paths[0]
		t.Fatalf("%d of %d writes complete after %v; path ring %d of %d used, %d in flight, sequence nacks %d",
			got, n, time.Duration(l.now), p.nextSeq-p.oldest, p.mask+1, l.conns[0].snd.inflight,
			l.eps[0].stats.NacksReceived[wire.NackSequence])
	}
	t.Logf("%d writes complete at %v, %d SEQUENCE NACKs", n, time.Duration(l.now), l.eps[0].stats.NacksReceived[wire.NackSequence])
}

// TestRoCEv2RNRStaleTransmission (finding 13): a SEND the peer never has a
// buffer for, over a link that duplicates NACKs late and loses half the
// data. A late duplicate RNR NACK of an earlier transmission must not
// hold the PSN while a newer transmission of it is out: that one, if it
// is lost, would stay live at the head of the path ring, where no timer
// looks (nothing is "in flight"), until the ring fills and the sender can
// send nothing, not even the retransmissions that would reach the RNR
// retry limit. The connection must fail on that limit instead (and not
// on MaxRetries: every lost resend is followed by RNR NACKs, so the peer
// is never silent, §8.4).
func TestRoCEv2RNRStaleTransmission(t *testing.T) {
	l := newTLink(t, Config{Mode: ModeRoCEv2, RNRRetries: 200}, 1<<20)
	l.connect()
	n := 0
	l.filter = func(from int, pkt []byte) (bool, Duration) {
		p, ok := parse(pkt)
		if !ok {
			return false, 0
		}
		if from == 1 && p.Class == wire.ClassNack {
			l.inject(1, 0, append([]byte(nil), pkt...), l.delay+30*time.Microsecond)
			return false, 0
		}
		if from == 0 && p.Class == wire.ClassData {
			n++
			return n%2 == 0, 0
		}
		return false, 0
	}
	if err := l.conns[0].PostSend(&WorkRequest{WRID: 1, Local: make([]byte, 100)}); err != nil {
		t.Fatal(err)
	}
	l.run(Time(5*time.Second), func() bool { return l.done(0, OpSend) == 1 })
	if l.done(0, OpSend) != 1 {
		p := &l.conns[0].snd.paths[0]
		t.Fatalf("SEND not complete after %v: %v; ring %d of %d used, %d in flight, %d RNR NACKs",
			time.Duration(l.now), l.cq[0], p.nextSeq-p.oldest, p.mask+1, l.conns[0].snd.inflight,
			l.eps[0].stats.NacksReceived[wire.NackRNR])
	}
	if l.completions(0, OpSend, StatusRNRRetryExceeded) != 1 {
		t.Fatalf("SEND completed otherwise: %v", l.cq[0])
	}
	t.Logf("SEND failed after %v (%v), %d RNR NACKs, %d timeouts", time.Duration(l.now), l.cq[0][1].Status,
		l.eps[0].stats.NacksReceived[wire.NackRNR], l.eps[0].stats.Timeouts)
}

// TestListenerStoppedListening (finding 6, §7.3): the listener's
// application stops listening once it has its connection (a queue pair
// accepts one peer), and the first ACCEPT is lost. The retried CONNECT
// names an established connection: it must draw the ACCEPT again, not
// REJECT NO_SERVICE.
func TestListenerStoppedListening(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	accepts := 0
	l.filter = func(from int, pkt []byte) (bool, Duration) {
		p, ok := parse(pkt)
		if ok && p.Class == wire.ClassConn && p.Conn().Opcode() == wire.OpAccept {
			l.eps[1].Unlisten(tService)
			accepts++
			return accepts == 1, 0
		}
		return false, 0
	}
	if _, err := l.eps[0].Connect(l.now, l.addrs[1], tService, l.mems[0]); err != nil {
		t.Fatal(err)
	}
	l.run(Time(time.Second), func() bool { return l.conns[0] != nil || l.done(0, OpClosed) > 0 })
	if l.conns[0] == nil {
		t.Fatalf("connect failed after a lost ACCEPT: %v (rejects sent %d)", l.cq[0], l.eps[1].stats.RejectsSent)
	}
	if accepts != 2 {
		t.Errorf("%d ACCEPTs, want 2", accepts)
	}
}

// TestForgedSendClaimsBuffer (finding 15): a forged SEND, ahead of the
// genuine stream and PSN, names the receive buffer the genuine SEND will.
// Each posted buffer may complete once; the genuine SEND's, earlier in
// its stream, is the one that can take effect, so it gets the buffer,
// and the forged message can no longer write into it.
func TestForgedSendClaimsBuffer(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	l.connect()
	a, b := l.conns[0], l.conns[1]
	buf := make([]byte, 256)
	if err := b.PostRecv(77, buf); err != nil {
		t.Fatal(err)
	}
	// The forgery: stream 0, three positions ahead; PSN ten ahead.
	forged := wire.AppendData(nil, &wire.DataHeader{Opcode: wire.OpSend, Flags: wire.FlagAckReq,
		DstConn: b.localID, PSN: b.rcv.cum + 10, MsgID: a.snd.nextMsgID + 10, StreamSeq: 3,
		MsgLen: 64, RecvSeq: 0, PathID: 1, PathSeq: 0}, make([]byte, 64))
	l.inject(0, 0, forged, 0)
	l.run(Time(10*time.Microsecond), nil)
	src := pattern(100, 5)
	if err := a.PostSend(&WorkRequest{WRID: 1, Local: src}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // stream positions 1..3: the forged one's turn comes
		if err := a.PostWrite(&WorkRequest{WRID: uint64(10 + i), Local: pattern(10, 1), RemoteAddr: regionBase, RKey: regionKey}); err != nil {
			t.Fatal(err)
		}
	}
	l.run(Time(100*time.Millisecond), func() bool { return l.done(0, OpWrite) == 3 })
	recvs := 0
	for _, c := range l.cq[1] {
		if c.Op == OpRecv && c.WRID == 77 {
			recvs++
		}
	}
	if recvs != 1 {
		t.Fatalf("buffer 77 completed %d times: %v", recvs, l.cq[1])
	}
	if l.completions(0, OpSend, StatusOK) != 1 || string(buf[:len(src)]) != string(src) {
		t.Fatalf("the genuine SEND did not land: %v", l.cq[0])
	}
	// A late packet of the forged message must not write into the
	// buffer the application has back.
	late := wire.AppendData(nil, &wire.DataHeader{Opcode: wire.OpSend, DstConn: b.localID,
		PSN: b.rcv.cum + 11, MsgID: a.snd.nextMsgID + 10, StreamSeq: 3, MsgLen: 64, Offset: 0,
		RecvSeq: 0, PathID: 1, PathSeq: 1}, make([]byte, 64))
	l.inject(0, 0, late, 0)
	l.run(Time(10*time.Microsecond), nil)
	if string(buf[:len(src)]) != string(src) {
		t.Fatal("a forged packet wrote into a completed receive buffer")
	}
}

// TestRNRHintCapped (finding 16): an RNR NACK's Info is the receiver's
// suggested delay in µs, up to 2^32 of them (71 minutes). The sender caps
// the wait it takes from a NACK, so one (forged or confused) NACK cannot
// park a PSN for an hour.
func TestRNRHintCapped(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	l.connect()
	a, b := l.conns[0], l.conns[1]
	if err := b.PostRecv(1, make([]byte, 256)); err != nil {
		t.Fatal(err)
	}
	forgedOnce := false
	l.filter = func(from int, pkt []byte) (bool, Duration) {
		if from == 0 && !forgedOnce && isData(pkt, wire.OpSend) {
			forgedOnce = true
			d, _ := parse(pkt)
			h := wire.NackHeader{DstConn: a.localID, PSN: d.Data().PSN(), PathID: d.Data().PathID(),
				Reason: wire.NackRNR, PathSeq: d.Data().PathSeq(), CumPSN: b.rcv.cum, Info: 0xffffffff}
			nk := make([]byte, wire.NackLen+wire.TrailerLen)
			h.Put(nk)
			l.inject(1, 0, nk, l.delay)
			return true, 0
		}
		return false, 0
	}
	if err := a.PostSend(&WorkRequest{WRID: 2, Local: make([]byte, 100)}); err != nil {
		t.Fatal(err)
	}
	l.run(Time(5*time.Second), func() bool { return l.done(0, OpSend) == 1 })
	if l.completions(0, OpSend, StatusOK) != 1 {
		t.Fatalf("SEND not complete after %v (held until %v)", time.Duration(l.now), time.Duration(a.snd.rnrDeadline))
	}
	t.Logf("SEND complete at %v", time.Duration(l.now))
	if max := Time(a.ep.cfg.MaxRTO) + Time(time.Millisecond); l.now > max {
		t.Errorf("SEND completed after %v: the NACK's hint was not capped", time.Duration(l.now))
	}
}

// TestPathTimerIdle (finding 14): a forged packet moves the receiver's
// highest path sequence for one PathID ahead of the sender's (§13), so
// that path's transmission is never acked on its path (its PSN is, by
// another path's CumPSN). Nothing acked later can overtake it, so it
// cannot time out either; the path loop must not poll it every quarter
// path timeout for the rest of the connection's life.
func TestPathTimerIdle(t *testing.T) {
	l := newTLink(t, Config{Paths: 4}, 1<<16)
	l.connect()
	l.run(Time(time.Millisecond), nil) // the handshake's timers settle
	a, b := l.conns[0], l.conns[1]
	var held []tpkt
	l.filter = func(from int, pkt []byte) (bool, Duration) {
		if from == 0 && isData(pkt, wire.OpWrite) {
			held = append(held, tpkt{b: append([]byte(nil), pkt...)})
			return true, 0
		}
		return false, 0
	}
	for i := range 2 {
		// The second leaves later than the first, so the first one's
		// ack cannot make it overdue.
		l.now += Time(time.Microsecond)
		if err := a.PostWrite(&WorkRequest{WRID: uint64(i), Local: pattern(64, 1), RemoteAddr: regionBase, RKey: regionKey}); err != nil {
			t.Fatal(err)
		}
		l.flush()
	}
	l.filter = nil
	if len(held) != 2 {
		t.Fatalf("%d packets held", len(held))
	}
	second, _ := parse(held[1].b)
	pid, seq := second.Data().PathID(), second.Data().PathSeq()
	// The forgery: a "duplicate" (PSN behind CumPSN) far ahead on the
	// second packet's path.
	forged := wire.AppendData(nil, &wire.DataHeader{Opcode: wire.OpWrite, DstConn: b.localID,
		PSN: b.rcv.cum - 1, PathID: pid, PathSeq: seq + 1000, MsgLen: 8, RemoteAddr: regionBase, RKey: regionKey}, make([]byte, 8))
	l.inject(0, 0, forged, 0)
	l.inject(0, 0, held[0].b, 1)
	l.inject(0, 0, held[1].b, 1)
	l.run(Time(10*time.Millisecond), func() bool { return l.done(0, OpWrite) == 2 })
	if l.completions(0, OpWrite, StatusOK) != 2 {
		t.Fatalf("writes: %v", l.cq[0])
	}
	l.run(Time(10*time.Millisecond), nil)
	w := l.wakeups[0]
	l.run(Time(100*time.Millisecond), nil)
	w = l.wakeups[0] - w
	t.Logf("sender wake-ups in 100 ms idle: %d (path %d: %d unresolved)", w, pid, a.snd.paths[pid].inflight)
	if w > 100 {
		t.Errorf("the idle sender woke %d times in 100 ms", w)
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

// TestStreamRecoversAfterForgedPSN (item 10): a forged packet takes a PSN
// before the genuine packet of it arrives, so the receiver drops the
// genuine one as a duplicate and its message never arrives (§13). The
// messages after it on its stream must still take effect once every PSN
// before them has arrived, rather than wait for the lost position forever.
func TestStreamRecoversAfterForgedPSN(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	l.connect()
	a, b := l.conns[0], l.conns[1]
	forged := wire.AppendData(nil, &wire.DataHeader{Opcode: wire.OpWrite, Flags: wire.FlagAckReq,
		DstConn: b.localID, PSN: b.rcv.cum + 1, MsgID: 100, Stream: 3, StreamSeq: 0, MsgLen: 8,
		RemoteAddr: regionBase, RKey: regionKey, PathID: 1, PathSeq: 0}, make([]byte, 8))
	l.inject(0, 0, forged, 0)
	l.run(Time(10*time.Microsecond), nil)
	for i := range 3 {
		if err := a.PostWrite(&WorkRequest{WRID: uint64(i), HasImm: true, Imm: uint32(i), RemoteAddr: regionBase, RKey: regionKey}); err != nil {
			t.Fatal(err)
		}
	}
	l.run(Time(100*time.Millisecond), func() bool { return l.done(0, OpWrite) == 3 && l.done(1, OpRecvWriteImm) >= 2 })
	var imms []uint32
	for _, c := range l.cq[1] {
		if c.Op == OpRecvWriteImm {
			imms = append(imms, c.Imm)
		}
	}
	if len(imms) != 2 || imms[0] != 0 || imms[1] != 2 {
		t.Fatalf("took effect at the receiver: %v, want [0 2] (1 lost to the forged PSN); positions lost %d",
			imms, l.eps[1].stats.StreamPositionsLost)
	}
}

// forgeSteal injects, as from side 0, a complete one-packet WRITE of
// stream 3 at position seq whose PSN is psn, as a forger that wins the
// race for that PSN does: side 1 then drops the genuine packet of psn as
// a duplicate (§13).
func (l *tlink) forgeSteal(psn wire.PSN, id, seq uint32) {
	b := l.conns[1]
	l.inject(0, 0, wire.AppendData(nil, &wire.DataHeader{Opcode: wire.OpWrite, Flags: wire.FlagAckReq,
		DstConn: b.localID, PSN: psn, MsgID: id, Stream: 3, StreamSeq: seq, MsgLen: 8,
		RemoteAddr: regionBase, RKey: regionKey, PathID: 1, PathSeq: seq}, make([]byte, 8)), 0)
}

// immsAt lists the immediates of the WRITE_IMMs that took effect at side i.
func (l *tlink) immsAt(i int) []uint32 {
	var imms []uint32
	for _, c := range l.cq[i] {
		if c.Op == OpRecvWriteImm {
			imms = append(imms, c.Imm)
		}
	}
	return imms
}

// TestStreamRecoversAfterLostRun (§14 K20, narrowed): forged packets take the
// PSNs of two consecutive positions of a stream, the second PSN of a
// two-packet message at position 1 and the one PSN of position 2, so
// position 1 stays incomplete and position 2 never arrives, though every
// PSN of both has. Position 3 must still take effect: the nearest
// complete message ahead is the evidence, not only the next position's.
// (With only position s+1 as evidence the stream stalled for good.)
func TestStreamRecoversAfterLostRun(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	l.connect()
	a, b := l.conns[0], l.conns[1]
	c := b.rcv.cum
	if a.snd.nextPSN != c {
		t.Fatalf("sender's next PSN %v, receiver's cum %v", a.snd.nextPSN, c)
	}
	l.forgeSteal(c+2, 100, 0)
	l.forgeSteal(c+3, 101, 1)
	l.run(Time(10*time.Microsecond), nil)
	sizes := []int{0, a.maxPayload + 1, 0, 0} // PSNs c, c+1..c+2, c+3, c+4
	for i, n := range sizes {
		if err := a.PostWrite(&WorkRequest{WRID: uint64(i), HasImm: true, Imm: uint32(i), Local: make([]byte, n),
			RemoteAddr: regionBase, RKey: regionKey}); err != nil {
			t.Fatal(err)
		}
	}
	l.run(Time(100*time.Millisecond), func() bool { return l.done(0, OpWrite) == 4 && l.done(1, OpRecvWriteImm) >= 2 })
	if imms := l.immsAt(1); len(imms) != 2 || imms[0] != 0 || imms[1] != 3 {
		t.Fatalf("took effect at the receiver: %v, want [0 3] (1 and 2 lost to forged PSNs); positions lost %d",
			imms, l.eps[1].stats.StreamPositionsLost)
	}
	if n := l.eps[1].stats.StreamPositionsLost; n != 2 {
		t.Errorf("%d positions counted lost, want 2", n)
	}
}

// TestLostRunEvidenceBounded: a forged complete message far ahead of its
// stream (more than a message window) whose first PSN has arrived is no
// evidence that the positions before it were lost: taken as such, it
// would move the stream a million positions on, and every genuine
// message after it would then fail as already taken effect. Here it
// takes the PSN of the genuine position 0, which is lost (position 1 is
// the evidence); positions 1 and 2 must take effect.
func TestLostRunEvidenceBounded(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	l.connect()
	a, b := l.conns[0], l.conns[1]
	l.forgeSteal(b.rcv.cum, 100, 1<<20)
	l.run(Time(10*time.Microsecond), nil)
	for i := range 3 {
		if err := a.PostWrite(&WorkRequest{WRID: uint64(i), Stream: 3, HasImm: true, Imm: uint32(i),
			RemoteAddr: regionBase, RKey: regionKey}); err != nil {
			t.Fatal(err)
		}
	}
	l.run(Time(100*time.Millisecond), func() bool { return l.done(0, OpWrite) == 3 && l.done(1, OpRecvWriteImm) >= 2 })
	if imms, lost := l.immsAt(1), l.eps[1].stats.StreamPositionsLost; len(imms) != 2 || imms[0] != 1 || imms[1] != 2 || lost != 1 {
		t.Fatalf("took effect at the receiver: %v, want [1 2]; positions lost %d, want 1", imms, lost)
	}
}

// TestRNRWaitIsNotSilence (item 17's mechanism): the metaroce controller,
// a receiver slow to post buffers (one a millisecond) for 40 SENDs of six
// packets. The sender's packets cycle through RNR holds, so some are in
// flight when the retransmission timer expires, with no ack to restart
// it. Those expiries are no silence (the peer answers every packet) and
// must not count as timeouts: each one used to cut the controller's rate
// (OnTimeout) and count against MaxRetries, until the sender's packets,
// READ responses to the peer included, left far apart.
func TestRNRWaitIsNotSilence(t *testing.T) {
	l := newTLink(t, Config{Congestion: "metaroce", RNRRetries: 1 << 20}, 1<<20)
	l.connect()
	a, b := l.conns[0], l.conns[1]
	const n = 40
	for i := range n {
		if err := a.PostSend(&WorkRequest{WRID: uint64(i), Local: make([]byte, 8000), Stream: uint16(i % 2)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if err := b.PostRead(&WorkRequest{WRID: uint64(100 + i), Local: make([]byte, 64<<10), RemoteAddr: regionBase, RKey: regionKey}); err != nil {
			t.Fatal(err)
		}
	}
	for k := 0; k < n && a.State() == StateEstablished; k++ {
		if err := b.PostRecv(uint64(1000+k), make([]byte, 8192)); err != nil {
			t.Fatal(err)
		}
		l.eps[1].markReady(b)
		l.run(Time(time.Millisecond), nil)
	}
	l.run(Time(time.Second), func() bool { return l.done(0, OpSend) == n && l.done(1, OpRead) == 10 })
	st, _ := a.Congestion()
	t.Logf("at %v: sends %d/%d, reads %d/10, RNR NACKs %d, timeouts %d, pacing %d Mb/s",
		time.Duration(l.now), l.completions(0, OpSend, StatusOK), n, l.completions(1, OpRead, StatusOK),
		l.eps[0].stats.NacksReceived[wire.NackRNR], l.eps[0].stats.Timeouts, st.PacingRate/1e6)
	if l.completions(0, OpSend, StatusOK) != n || l.completions(1, OpRead, StatusOK) != 10 {
		t.Fatalf("not all complete: %v", l.cq[0])
	}
	if to := l.eps[0].stats.Timeouts; to != 0 {
		t.Errorf("%d retransmission timeouts counted while the peer answered every packet with RNR", to)
	}
}

// TestStaleAckNoRTTSample: an ack that reaches the sender late or twice
// (held in a queue, duplicated, replayed) echoes the Timestamp of a
// transmission already resolved. Its `now − EchoTimestamp` is that
// packet's age, seconds here, not a round trip: taken as a sample (as
// FuzzConnection found with a replayed ack), it held the smoothed RTT at
// 3 s and the metaroce controller's pacing rate at 28 kb/s, so a SEND
// posted afterwards had not completed 30 s later. §5.7 step 2 takes no
// sample from it.
func TestStaleAckNoRTTSample(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	var acks [][]byte
	l.filter = func(from int, pkt []byte) (bool, Duration) {
		if p, ok := parse(pkt); ok && from == 1 && p.Class == wire.ClassAck {
			acks = append(acks, append([]byte(nil), pkt...))
		}
		return false, 0
	}
	l.connect()
	a := l.conns[0]
	write := func(id uint64) {
		if err := a.PostWrite(&WorkRequest{WRID: id, Local: make([]byte, 64), RemoteAddr: regionBase, RKey: regionKey}); err != nil {
			t.Fatal(err)
		}
	}
	write(0)
	l.run(Time(time.Second), func() bool { return l.done(0, OpWrite) == 1 })
	if len(acks) == 0 {
		t.Fatal("no ack seen")
	}
	old := acks[len(acks)-1]
	srtt := a.snd.rtt.srtt
	l.run(Time(2*time.Second), nil)
	// A write in flight, so the path has an unresolved transmission the
	// stale ack's path sequence must not be mistaken for; the stale ack
	// arrives before that write's own ack.
	l.filter = func(from int, pkt []byte) (bool, Duration) { return false, 50 * time.Microsecond }
	write(1)
	l.step(l.now)
	l.inject(1, 0, old, 0)
	l.run(Time(10*time.Microsecond), nil)
	if got := a.snd.rtt.srtt; got != srtt {
		t.Fatalf("a replayed ack 2 s old moved the smoothed RTT from %v to %v", time.Duration(srtt), time.Duration(got))
	}
	l.run(Time(time.Second), func() bool { return l.done(0, OpWrite) == 2 })
	if got := a.snd.rtt.srtt; got > 200*time.Microsecond {
		t.Fatalf("smoothed RTT %v after the write's own ack (link round trip 104 us)", time.Duration(got))
	}
}

// TestRingFullOfProbesNothingInFlight (FuzzConnection): a forged packet
// moves the receiver's highest sequence of the connection's only path
// ahead of the sender's (§13), so every ack of that path is bogus to the
// sender. Idle, the connection's keepalive PROBEs (§4.4) then stay
// unresolved in the path's ring until it is full, with no PSN in flight
// and so no retransmission timer. A WRITE posted then found no path with
// room and no timer to make any: it never completed. It must end, here
// by the connection failing on its retry limit, since no ack can get
// through.
func TestRingFullOfProbesNothingInFlight(t *testing.T) {
	l := newTLink(t, Config{Paths: 1, PathRing: 16}, 1<<16)
	l.connect()
	a, b := l.conns[0], l.conns[1]
	if err := a.PostWrite(&WorkRequest{WRID: 0, Local: pattern(64, 1), RemoteAddr: regionBase, RKey: regionKey}); err != nil {
		t.Fatal(err)
	}
	l.run(Time(10*time.Millisecond), func() bool { return l.done(0, OpWrite) == 1 })
	p := &a.snd.paths[0]
	forged := wire.AppendData(nil, &wire.DataHeader{Opcode: wire.OpWrite, DstConn: b.localID,
		PSN: b.rcv.cum - 1, PathID: 0, PathSeq: p.nextSeq + 1000, MsgLen: 8, RemoteAddr: regionBase, RKey: regionKey}, make([]byte, 8))
	l.inject(0, 0, forged, 0)
	l.run(Time(60*time.Second), nil)
	if !p.full() {
		t.Fatalf("the path's ring holds %d of %d after a minute idle: the scenario needs it full", p.nextSeq-p.oldest, p.mask+1)
	}
	if err := a.PostWrite(&WorkRequest{WRID: 1, Local: pattern(64, 2), RemoteAddr: regionBase, RKey: regionKey}); err != nil {
		t.Fatal(err)
	}
	l.run(Time(30*time.Second), func() bool { return l.done(0, OpWrite) == 2 })
	if l.done(0, OpWrite) != 2 {
		t.Fatalf("the WRITE posted behind a full ring did not complete in 30 s (in flight %d, retransmission timer %v)",
			a.snd.inflight, time.Duration(a.snd.rtoDeadline))
	}
	t.Logf("completions: %v", l.cq[0][len(l.cq[0])-1])
}
