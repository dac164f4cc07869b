package transport

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/wire"
)

// Hole repair (§8.10, §14 K19): scenarios in which the sender is made to
// take as delivered a PSN the receiver never got, and the receiver's
// stream must take effect again once honest traffic follows.

// postImms posts WRITE_IMMs on stream 0 of side 0 with the given
// immediates, one packet each.
func (l *tlink) postImms(imms ...uint32) {
	l.tb.Helper()
	for _, imm := range imms {
		if err := l.conns[0].PostWrite(&WorkRequest{WRID: uint64(imm), HasImm: true, Imm: imm,
			RemoteAddr: regionBase, RKey: regionKey}); err != nil {
			l.tb.Fatal(err)
		}
	}
}

// sendAll runs side 0 until it has sent every PSN before end (its pacer
// may space them).
func (l *tlink) sendAll(end wire.PSN) {
	l.tb.Helper()
	l.run(Time(time.Millisecond), func() bool { return l.conns[0].snd.nextPSN == end })
	if n := l.conns[0].snd.nextPSN; n != end {
		l.tb.Fatalf("side 0 sent up to %v, want %v", n, end)
	}
}

// holdFirstData returns a link filter that drops side 0's first data
// packet (not a PROBE) and reports it through *got.
func holdFirstData(got *wire.DataHeader) func(int, []byte) (bool, Duration) {
	done := false
	return func(from int, pkt []byte) (bool, Duration) {
		if done || from != 0 {
			return false, 0
		}
		p, err := wire.Parse(pkt)
		if err != nil || p.Class != wire.ClassData || p.Data().Opcode() == wire.OpProbe {
			return false, 0
		}
		done = true
		got.Decode(p.Data())
		return true, 0
	}
}

// forgedAck is an ack for side 0 with CumPSN cum on a path side 0 has
// sent on, acknowledging only its latest transmission there.
func (l *tlink) forgedAck(cum wire.PSN, pid uint16, echo uint64) []byte {
	a := l.conns[0]
	h := wire.AckHeader{DstConn: a.localID, CumPSN: cum, PathID: pid,
		PathAckSeq: a.snd.paths[pid].nextSeq - 1, EchoTimestamp: echo, Credit: 128}
	h.Sack[0] = 1
	return wire.AppendAck(nil, &h)
}

// TestHoleRepairAfterForgedAck (§14 K19): the first WRITE_IMM's only
// packet is lost, and before the sender can notice, a forged ack with a
// CumPSN past it makes the sender take it as delivered. The receiver's
// CumPSN then stops at that PSN. Without repair the second message (complete,
// waiting for position 0) and every later one on the stream never take
// effect. With it, the sender, left with an ack behind its una that it
// could not judge (it echoes a transmission older than the forgery) and
// nothing in flight, asks with a PROBE (§8.10 "Asking"); the probe's ack
// proves the hole, the sender voids it, and the stream goes on: 1 and 2
// take effect, 0 is lost.
func TestHoleRepairAfterForgedAck(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	l.connect()
	a, b := l.conns[0], l.conns[1]
	p := a.snd.nextPSN
	var lost wire.DataHeader
	l.filter = holdFirstData(&lost)
	l.postImms(0, 1)
	l.sendAll(p + 2)
	if lost.PSN != p {
		t.Fatalf("dropped PSN %v, want the first, %v", lost.PSN, p)
	}
	l.filter = nil
	l.inject(1, 0, l.forgedAck(p+2, lost.PathID, 0), 0)
	l.run(Time(time.Millisecond), func() bool { return l.done(0, OpWrite) == 2 })
	if a.snd.una != p+2 || b.rcv.cum != p {
		t.Fatalf("after the forged ack: sender's una %v, receiver's CumPSN %v; want %v and %v", a.snd.una, b.rcv.cum, p+2, p)
	}
	l.run(Time(time.Millisecond), nil) // idle: only the sender's question can prove it
	if n := a.ep.stats.HolesRepaired; n != 1 {
		t.Fatalf("%d holes repaired while the sender was idle, want 1 (its PROBE's ack proves it)", n)
	}
	l.postImms(2)
	l.run(Time(100*time.Millisecond), func() bool { return len(l.immsAt(1)) >= 2 })
	if imms := l.immsAt(1); len(imms) != 2 || imms[0] != 1 || imms[1] != 2 {
		t.Fatalf("took effect at the receiver: %v, want [1 2] (0 lost to the forged ack); receiver's CumPSN %v, sender's una %v",
			imms, b.rcv.cum, a.snd.una)
	}
	st := a.ep.stats
	t.Logf("holes repaired %d, repair voids %d; receiver: voids consumed %d, duplicates %d, positions lost %d",
		st.HolesRepaired, st.RepairVoidsSent, b.ep.stats.VoidReceived, b.ep.stats.Duplicates, b.ep.stats.StreamPositionsLost)
	if st.HolesRepaired != 1 || st.RepairVoidsSent != 2 {
		t.Errorf("%d holes repaired with %d voids; want 1 with 2 (PSNs %v and %v)", st.HolesRepaired, st.RepairVoidsSent, p, p+1)
	}
	if b.ep.stats.VoidReceived != 1 || b.ep.stats.StreamPositionsLost != 1 {
		t.Errorf("receiver consumed %d voids and lost %d positions; want 1 and 1", b.ep.stats.VoidReceived, b.ep.stats.StreamPositionsLost)
	}
	if a.State() != StateEstablished || b.State() != StateEstablished {
		t.Fatalf("connections %v %v", a.State(), b.State())
	}
}

// TestHoleRepairAfterForgedPathSeq (§14 K19, the forged-data variant): the
// first message's packet is lost, and a forged PROBE takes its
// transmission's PathID and PathSeq, so the receiver's SACK reports that
// transmission arrived and the sender takes the PSN as delivered. The
// stream must recover as after a forged ack.
func TestHoleRepairAfterForgedPathSeq(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	l.connect()
	a, b := l.conns[0], l.conns[1]
	p := a.snd.nextPSN
	var lost wire.DataHeader
	l.filter = holdFirstData(&lost)
	l.postImms(0, 1)
	l.sendAll(p + 2)
	l.filter = nil
	l.inject(0, 0, wire.AppendData(nil, &wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq, DstConn: b.localID,
		PathID: lost.PathID, PathSeq: lost.PathSeq, Timestamp: lost.Timestamp}, nil), 0)
	l.run(Time(time.Millisecond), func() bool { return l.done(0, OpWrite) == 2 })
	if a.snd.una != p+2 || b.rcv.cum != p {
		t.Fatalf("after the forged probe: sender's una %v, receiver's CumPSN %v; want %v and %v", a.snd.una, b.rcv.cum, p+2, p)
	}
	l.postImms(2)
	l.run(Time(100*time.Millisecond), func() bool { return len(l.immsAt(1)) >= 2 })
	if imms := l.immsAt(1); len(imms) != 2 || imms[0] != 1 || imms[1] != 2 {
		t.Fatalf("took effect at the receiver: %v, want [1 2]; receiver's CumPSN %v, sender's una %v", imms, b.rcv.cum, a.snd.una)
	}
	if a.ep.stats.HolesRepaired == 0 {
		t.Errorf("no hole repaired")
	}
}

// TestHoleRepairWhenIdle: after the forged ack the sender has nothing more
// to send, so no data draws an ack, and the acks it got echo transmissions
// older than the forgery. It asks (§8.10): a PROBE whose ack carries CumPSN
// and echoes the probe, sent after the forgery, proves the hole long before
// either end's keepalive would, and the message behind it takes effect.
// (Before the sender asked, the hole waited for the sender's own keepalive
// PROBE, which it sends only if its peer does not probe first: a fuzzed
// run stalled 30 s that way.)
func TestHoleRepairWhenIdle(t *testing.T) {
	l := newTLink(t, Config{KeepaliveInterval: 10 * time.Millisecond}, 1<<16)
	l.connect()
	a, b := l.conns[0], l.conns[1]
	p := a.snd.nextPSN
	var lost wire.DataHeader
	l.filter = holdFirstData(&lost)
	l.postImms(0, 1)
	l.sendAll(p + 2)
	l.filter = nil
	l.inject(1, 0, l.forgedAck(p+2, lost.PathID, 0), 0)
	l.run(Time(2*time.Millisecond), func() bool { return len(l.immsAt(1)) >= 1 })
	if imms := l.immsAt(1); len(imms) != 1 || imms[0] != 1 {
		t.Fatalf("took effect at the receiver within 2 ms: %v, want [1]; receiver's CumPSN %v, sender's una %v",
			imms, b.rcv.cum, a.snd.una)
	}
	if n := a.ep.stats.KeepaliveProbes + b.ep.stats.KeepaliveProbes; n != 0 {
		t.Errorf("%d keepalive probes: the sender's own question should have proven the hole first", n)
	}
}

// TestHoleRepairFalseProofHarmless: a forged ack with a CumPSN behind the
// sender's una, echoing a transmission sent after una got there, "proves"
// a hole that is not there. The sender voids PSNs the receiver already
// has: the receiver takes them for duplicates (§8.2), consumes nothing,
// and every message, the one in flight too, completes and takes effect
// once, with its bytes in place.
func TestHoleRepairFalseProofHarmless(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	l.connect()
	a, b := l.conns[0], l.conns[1]
	p := a.snd.nextPSN
	l.postImms(0, 1)
	l.run(Time(time.Millisecond), func() bool { return l.done(0, OpWrite) == 2 && len(l.immsAt(1)) == 2 })
	if a.snd.una != p+2 || b.rcv.cum != p+2 {
		t.Fatalf("sender's una %v, receiver's CumPSN %v; want %v", a.snd.una, b.rcv.cum, p+2)
	}
	l.run(Time(time.Millisecond), nil)
	src := pattern(3000, 9)
	if err := a.PostWrite(&WorkRequest{WRID: 10, Local: src, RemoteAddr: regionBase + 64, RKey: regionKey}); err != nil {
		t.Fatal(err)
	}
	l.flush()
	var pid uint16
	for i := range a.snd.paths {
		if a.snd.paths[i].inflight > 0 {
			pid = uint16(i)
		}
	}
	dups := b.ep.stats.Duplicates
	l.inject(1, 0, l.forgedAck(p, pid, uint64(l.now)), 0)
	l.postImms(3)
	l.run(Time(100*time.Millisecond), func() bool { return l.done(0, OpWrite) == 4 && len(l.immsAt(1)) == 3 })
	st := a.ep.stats
	t.Logf("holes repaired %d, repair voids %d; receiver duplicates +%d, voids consumed %d",
		st.HolesRepaired, st.RepairVoidsSent, b.ep.stats.Duplicates-dups, b.ep.stats.VoidReceived)
	if st.HolesRepaired != 1 || st.RepairVoidsSent != 2 {
		t.Fatalf("%d holes repaired with %d voids; want the false proof taken, 1 with 2", st.HolesRepaired, st.RepairVoidsSent)
	}
	if n := b.ep.stats.VoidReceived; n != 0 {
		t.Errorf("the receiver consumed %d voids; they were duplicates", n)
	}
	if n := b.ep.stats.Duplicates - dups; n < 2 {
		t.Errorf("%d duplicates at the receiver; want the 2 repair voids", n)
	}
	if l.completions(0, OpWrite, StatusOK) != 4 {
		t.Fatalf("sender's completions: %v", l.cq[0])
	}
	if imms := l.immsAt(1); len(imms) != 3 || imms[2] != 3 {
		t.Fatalf("took effect at the receiver: %v, want [0 1 3]", imms)
	}
	if got := l.regions[1][64 : 64+len(src)]; string(got) != string(src) {
		t.Fatalf("the WRITE's bytes are not in place")
	}
}

// fourDelivered connects a link's two ends and delivers four WRITE_IMMs
// from end 0 (PSNs p to p+3), then lets both idle a millisecond.
func fourDelivered(t *testing.T) (*tlink, *Conn, wire.PSN) {
	t.Helper()
	l := newTLink(t, Config{}, 1<<16)
	l.connect()
	a := l.conns[0]
	p := a.snd.nextPSN
	l.postImms(0, 1, 2, 3)
	l.run(Time(time.Millisecond), func() bool { return l.done(0, OpWrite) == 4 })
	l.run(Time(time.Millisecond), nil)
	return l, a, p
}

// TestHoleRepairRateLimited: a burst of forged acks that each prove the
// same hole gets one repair per RTO, not one per ack.
func TestHoleRepairRateLimited(t *testing.T) {
	l, a, p := fourDelivered(t)
	l.postImms(4)
	l.flush()
	for i := range 50 {
		l.inject(1, 0, l.forgedAck(p+wire.PSN(i%4), uint16(a.snd.lastPath), uint64(l.now)), 0)
	}
	l.run(Time(a.snd.rto)/2, nil)
	if st := a.ep.stats; st.RepairVoidsSent != 4 {
		t.Fatalf("50 forged acks within an RTO drew %d repair voids (%d repairs); want 4, one per PSN of the hole",
			st.RepairVoidsSent, st.HolesRepaired)
	}
}

// TestHoleRepairQueueBounded: a proof from a CumPSN far behind (a mutated
// ack's) queues a window of voids; an honest proof within the RTO that
// follows, while those still wait, must not stretch the queue from the
// first CumPSN to the second's window: it would hold millions of voids.
// (Found by FuzzConnection: a queue of 6 million voids, sent one by one.)
func TestHoleRepairQueueBounded(t *testing.T) {
	l, a, _ := fourDelivered(t)
	una, now := a.snd.una, l.now
	a.proveHole(now, una-1_000_000, uint64(now), false)
	a.proveHole(now+1, una-2, uint64(now), false)
	if d := a.snd.repairNext.Distance(a.snd.repairEnd); d <= 0 || int(d) > a.snd.window {
		t.Fatalf("repair queue [%v, %v): %d voids, want 1 to the window, %d", a.snd.repairNext, a.snd.repairEnd, d, a.snd.window)
	}
	if a.snd.repairNext != una-2 || a.snd.repairEnd != una {
		t.Errorf("repair queue [%v, %v), want [%v, %v)", a.snd.repairNext, a.snd.repairEnd, una-2, una)
	}
}

// TestHoleProofNoAllocs: an ack that proves a hole, and the repair voids
// it queues, allocate nothing (the ring of una marks is a fixed array).
func TestHoleProofNoAllocs(t *testing.T) {
	l, a, p := fourDelivered(t)
	l.postImms(4)
	l.flush()
	pid := uint16(a.snd.lastPath)
	buf := make([]byte, a.ep.MaxPacket())
	ack := l.forgedAck(p, pid, uint64(l.now))
	pk, err := wire.Parse(ack)
	if err != nil {
		t.Fatal(err)
	}
	now := l.now + 1
	n := testing.AllocsPerRun(200, func() {
		now += Time(a.snd.rto) // past the rate limit: every ack repairs
		a.onAck(now, pk.Ack())
		for a.snd.repairing() {
			now = max(now, a.snd.nextTx) // the pacer spaces the voids
			if k, _ := a.buildData(now, buf); k == 0 {
				t.Fatal("no repair void built")
			}
		}
	})
	if n != 0 {
		t.Errorf("a proving ack and its repair allocate %.1f times", n)
	}
	if a.ep.stats.RepairVoidsSent < 200 {
		t.Fatalf("%d repair voids", a.ep.stats.RepairVoidsSent)
	}
}
