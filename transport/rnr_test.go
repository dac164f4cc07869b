package transport

import (
	"bytes"
	"testing"
	"time"

	"github.com/metaroce/metaroce/wire"
)

// connectWith is connect with options.
func (l *tlink) connectWith(o ConnectOptions) {
	l.tb.Helper()
	if _, err := l.eps[0].ConnectWith(l.now, l.addrs[1], tService, l.mems[0], o); err != nil {
		l.tb.Fatal(err)
	}
	l.run(Time(time.Second), func() bool { return l.conns[0] != nil && l.conns[1] != nil })
	if l.conns[0] == nil || l.conns[1] == nil {
		l.tb.Fatalf("not connected: %v %v", l.cq[0], l.cq[1])
	}
}

// rnrSizes are the SENDs of the stall scenarios: single packets and
// messages of 6 and 15 packets at MTU 1500, so a round resends one packet
// of each only if the backoff holds a message's other PSNs behind its
// probe.
var rnrSizes = []int{100, 8000, 100, 20000}

// stallSends posts rnrSizes as SENDs from endpoint from on stream 0 and
// returns their payloads.
func (l *tlink) stallSends(from int) [][]byte {
	l.tb.Helper()
	var srcs [][]byte
	for i, n := range rnrSizes {
		src := pattern(n, byte(i+1))
		if err := l.conns[from].PostSend(&WorkRequest{WRID: uint64(i), Local: src}); err != nil {
			l.tb.Fatal(err)
		}
		srcs = append(srcs, src)
	}
	return srcs
}

// drainStalled posts endpoint to's receive buffers for srcs after its
// stall, runs until every SEND has completed and checks that each landed
// whole, in posting order, at both ends, within about one backoff cap of
// the posting.
func (l *tlink) drainStalled(to int, srcs [][]byte) {
	l.tb.Helper()
	from := 1 - to
	bufs := make([][]byte, len(srcs))
	posted := l.now
	for k := range srcs {
		bufs[k] = make([]byte, 32<<10)
		if err := l.conns[to].PostRecv(uint64(1000+k), bufs[k]); err != nil {
			l.tb.Fatal(err)
		}
	}
	l.run(Time(time.Second), func() bool { return l.done(from, OpSend) == len(srcs) })
	if took := l.now - posted; took > Time(rnrMaxWait+time.Millisecond) {
		l.tb.Errorf("the SENDs took %v after the receives were posted, want about one backoff cap (%v)",
			time.Duration(took), rnrMaxWait)
	}
	var sends, recvs []Completion
	for _, c := range l.cq[from] {
		if c.Op == OpSend {
			sends = append(sends, c)
		}
	}
	for _, c := range l.cq[to] {
		if c.Op == OpRecv {
			recvs = append(recvs, c)
		}
	}
	if len(sends) != len(srcs) || len(recvs) != len(srcs) {
		l.tb.Fatalf("%d SENDs and %d receives complete of %d: %v / %v", len(sends), len(recvs), len(srcs), l.cq[from], l.cq[to])
	}
	for k, src := range srcs {
		if s := sends[k]; s.WRID != uint64(k) || s.Status != StatusOK {
			l.tb.Errorf("SEND completion %d: %+v, want wr %d ok", k, s, k)
		}
		r := recvs[k]
		if r.WRID != uint64(1000+k) || r.Status != StatusOK || r.Bytes != len(src) || !bytes.Equal(bufs[k][:len(src)], src) {
			l.tb.Errorf("receive completion %d: %+v (content equal %v), want wr %d, %d bytes", k, r,
				bytes.Equal(bufs[k][:len(src)], src), 1000+k, len(src))
		}
	}
}

// TestRNRRetryForever: a receiver posts nothing for 5 s of virtual time
// while four SENDs (1, 6, 1 and 15 packets) wait for it. With
// RNRRetryForever the connection lives through it, the resends back off
// from RNRDelay (20 us) doubling to rnrMaxWait (1 ms) and then keep to one
// packet per message per millisecond, nothing counts as a retransmission
// timeout, and once the buffers are posted every SEND lands, in order,
// within about a millisecond. Without it the same stall fails the
// connection on RNRRetries (1000 NACKs, about 0.1 s).
func TestRNRRetryForever(t *testing.T) {
	const stall = 5 * time.Second
	t.Run("forever", func(t *testing.T) {
		l := newTLink(t, Config{}, 1<<16)
		l.connectWith(ConnectOptions{RNRRetryForever: true})
		a := l.conns[0]
		if a.snd.rtt.srtt > 20*time.Microsecond {
			t.Fatalf("smoothed RTT %v: the scenario wants a few microseconds", a.snd.rtt.srtt)
		}
		var first []Time // transmissions of the first SEND's one PSN
		late := 0        // SEND transmissions in the last 4 s of the stall
		firstPSN := a.snd.nextPSN
		start := l.now
		l.filter = func(from int, pkt []byte) (bool, Duration) {
			if from == 0 && isData(pkt, wire.OpSend) {
				p, _ := parse(pkt)
				if p.Data().PSN() == firstPSN {
					first = append(first, l.now)
				}
				if l.now >= start+Time(time.Second) && l.now < start+Time(stall) {
					late++
				}
			}
			return false, 0
		}
		srcs := l.stallSends(0)
		l.run(Time(stall), nil)
		if a.State() != StateEstablished || l.done(0, OpSend) != 0 {
			t.Fatalf("after a %v stall: state %v (%v), completions %v", stall, a.State(), a.Err, l.cq[0])
		}
		nacks := l.eps[0].stats.NacksReceived[wire.NackRNR]
		t.Logf("%v stall: %d RNR NACKs, %d SEND transmissions in its last 4 s, %d of the first SEND", stall, nacks, late, len(first))
		// The first SEND's waits: each round's is the one before
		// doubled, from RNRDelay to the cap, plus the NACK's round trip.
		for k := 1; k < min(len(first), 10); k++ {
			want := rnrBackoff(20*time.Microsecond, uint8(k))
			if gap := Duration(first[k] - first[k-1]); gap < want || gap > want+20*time.Microsecond {
				t.Errorf("first SEND: resend %d came %v after the one before, want %v and a round trip", k, gap, want)
			}
		}
		// At the cap: one packet per message per rnrMaxWait and its round
		// trip; 2 % under that is room for the round trips.
		most := len(rnrSizes) * int(4*time.Second/rnrMaxWait)
		if late > most || late < most*98/100 {
			t.Errorf("%d SEND transmissions in 4 s of the stall at the cap, want one per message per %v: %d at most, %d at least",
				late, rnrMaxWait, most, most*98/100)
		}
		if to := l.eps[0].stats.Timeouts; to != 0 {
			t.Errorf("%d retransmission timeouts counted while the peer answered every packet", to)
		}
		l.filter = nil
		l.drainStalled(1, srcs)
	})
	t.Run("limited", func(t *testing.T) {
		l := newTLink(t, Config{}, 1<<16)
		l.connect()
		a := l.conns[0]
		l.stallSends(0)
		l.run(Time(stall), func() bool { return a.State() == StateFailed })
		if a.State() != StateFailed || l.completions(0, OpClosed, StatusRNRRetryExceeded) != 1 ||
			l.completions(0, OpSend, StatusRNRRetryExceeded) != len(rnrSizes) {
			t.Fatalf("without RNRRetryForever after %v: state %v, completions %v", time.Duration(l.now), a.State(), l.cq[0])
		}
		if l.now > Time(time.Second) {
			t.Errorf("failed at %v: RNRRetries %d of RNRDelay %v should take about 0.1 s", time.Duration(l.now),
				l.eps[0].cfg.RNRRetries, l.eps[0].cfg.RNRDelay)
		}
	})
}

// TestRNRForeverPeerVanishes: with RNRRetryForever, a receiver stalled for
// a second whose host then vanishes (every packet either way lost). An
// RNR NACK proves the peer alive, and no NACK comes any more: the
// connection must fail as any other whose peer is gone, on MaxRetries
// timeouts (retry exceeded), within a second or two, not wait for ever.
func TestRNRForeverPeerVanishes(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	l.connectWith(ConnectOptions{RNRRetryForever: true})
	a := l.conns[0]
	l.stallSends(0)
	l.run(Time(time.Second), nil)
	if a.State() != StateEstablished {
		t.Fatalf("failed during the stall: %v", a.Err)
	}
	cut := l.now
	l.filter = func(int, []byte) (bool, Duration) { return true, 0 }
	l.run(Time(10*time.Second), func() bool { return a.State() == StateFailed })
	if a.State() != StateFailed || l.completions(0, OpClosed, StatusRetryExceeded) != 1 {
		t.Fatalf("10 s after the peer vanished: state %v, completions %v", a.State(), l.cq[0])
	}
	took := Duration(l.now - cut)
	t.Logf("failed %v after the peer vanished: %v (%d timeouts)", took, a.Err, l.eps[0].stats.Timeouts)
	if took > 3*time.Second {
		t.Errorf("failed %v after the peer vanished, want MaxRetries' backoff (under a second)", took)
	}
}

// TestRNRForeverLossyStall: with RNRRetryForever, one SEND waits through
// a 10 s stall over a link that loses two of every 20 of its
// transmissions in a row. The second loss of a pair is an unanswered
// expiry of the retransmission timer (the first follows a NACK); the
// NACKs in between prove the peer there, so those expiries must not add
// up to MaxRetries (13 did in about a quarter of a second) nor leave the
// timer backed off.
func TestRNRForeverLossyStall(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	l.connectWith(ConnectOptions{RNRRetryForever: true})
	a := l.conns[0]
	n := 0
	l.filter = func(from int, pkt []byte) (bool, Duration) {
		if from == 0 && isData(pkt, wire.OpSend) {
			n++
			return n%20 < 2, 0
		}
		return false, 0
	}
	src := pattern(100, 9)
	if err := a.PostSend(&WorkRequest{WRID: 1, Local: src}); err != nil {
		t.Fatal(err)
	}
	l.run(Time(10*time.Second), func() bool { return a.State() != StateEstablished })
	if a.State() != StateEstablished {
		t.Fatalf("failed after %v of the stall, %d transmissions: %v", time.Duration(l.now), n, a.Err)
	}
	t.Logf("10 s stall: %d SEND transmissions, %d lost, %d timeouts", n, n/10, l.eps[0].stats.Timeouts)
	if a.snd.rto > 10*time.Millisecond {
		t.Errorf("RTO %v after the stall: backed off by lost probes the NACKs answered", a.snd.rto)
	}
	l.filter = nil
	buf := make([]byte, 256)
	if err := l.conns[1].PostRecv(2, buf); err != nil {
		t.Fatal(err)
	}
	l.run(Time(100*time.Millisecond), func() bool { return l.done(0, OpSend) == 1 })
	if l.completions(0, OpSend, StatusOK) != 1 || !bytes.Equal(buf[:len(src)], src) {
		t.Fatalf("SEND after the stall: %v", l.cq[0])
	}
}

// TestRNRForeverAccepted: the acceptor's option is its own. A listener
// with RNRRetryForever gives it to the connections it takes, and its
// SENDs live through the initiator's 1 s stall (ten times the limit);
// the initiator's connection, made without, keeps the limit. A deferred
// connection keeps its listener's setting through Accept and takes the
// accepting application's through AcceptWith.
func TestRNRForeverAccepted(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	l.eps[1].ListenWith(tService, l.mems[1], ListenOptions{RNRRetryForever: true})
	l.connect()
	a, b := l.conns[0], l.conns[1]
	if a.rnrForever || !b.rnrForever {
		t.Fatalf("RNRRetryForever: initiator %v, acceptor %v; want false, true", a.rnrForever, b.rnrForever)
	}
	srcs := l.stallSends(1)
	l.run(Time(time.Second), nil)
	if b.State() != StateEstablished || l.done(1, OpSend) != 0 {
		t.Fatalf("acceptor after a 1 s stall: state %v (%v), completions %v", b.State(), b.Err, l.cq[1])
	}
	l.drainStalled(0, srcs)

	for _, c := range []struct {
		name           string
		listen, accept bool
		with           bool // AcceptWith (else Accept)
	}{
		{"accept keeps the listener's", true, false, false},
		{"accept_with sets it", false, true, true},
		{"accept_with clears it", true, false, true},
	} {
		l := newTLink(t, Config{}, 1<<16)
		l.eps[1].ListenWith(tService, l.mems[1], ListenOptions{Defer: true, RNRRetryForever: c.listen})
		if _, err := l.eps[0].Connect(l.now, l.addrs[1], tService, l.mems[0]); err != nil {
			t.Fatal(err)
		}
		var req *Conn
		l.run(Time(time.Second), func() bool {
			for _, x := range l.cq[1] {
				if x.Op == OpRequest {
					req = x.Conn
				}
			}
			return req != nil
		})
		if req == nil {
			t.Fatalf("%s: no request: %v", c.name, l.cq[1])
		}
		var err error
		if c.with {
			err = req.AcceptWith(l.now, AcceptOptions{RNRRetryForever: c.accept})
		} else {
			err = req.Accept(l.now, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := c.listen && !c.with || c.accept; req.rnrForever != want {
			t.Errorf("%s: RNRRetryForever %v, want %v", c.name, req.rnrForever, want)
		}
	}
}

// TestRNRForeverNoAllocs: a round of the stall, at the cap (the sender's
// timer resends each message's probe, the receiver refuses it, the
// sender takes the NACK and sets the next wait), allocates nothing.
func TestRNRForeverNoAllocs(t *testing.T) {
	l := newTLink(t, Config{}, 1<<16)
	l.connectWith(ConnectOptions{RNRRetryForever: true})
	l.stallSends(0)
	l.run(Time(50*time.Millisecond), nil)
	ea, eb := l.eps[0], l.eps[1]
	bufA, bufB := make([]byte, ea.MaxPacket()), make([]byte, eb.MaxPacket())
	now := l.now
	round := func() {
		now = max(now, min(ea.NextTimeout(), eb.NextTimeout()))
		ea.Timeout(now)
		eb.Timeout(now)
		for {
			d, ok := ea.Transmit(now, bufA)
			if !ok {
				break
			}
			eb.ReceivePort(now, l.addrs[0], d.SrcPort, false, bufA[:d.Len])
			for {
				d, ok := eb.Transmit(now, bufB)
				if !ok {
					break
				}
				ea.ReceivePort(now, l.addrs[1], d.SrcPort, false, bufB[:d.Len])
			}
		}
	}
	for range 20 {
		round()
	}
	before := ea.stats.NacksReceived[wire.NackRNR]
	if n := testing.AllocsPerRun(200, round); n != 0 {
		t.Errorf("a round of an RNR stall allocates %.1f times", n)
	}
	// A round is one wakeup: of a probe's timer (a NACK), or of another
	// timer (the receiver's ack timer, say).
	if got := ea.stats.NacksReceived[wire.NackRNR] - before; got < 100 {
		t.Fatalf("%d RNR NACKs in 201 rounds: not the stall", got)
	}
	if l.conns[0].State() != StateEstablished {
		t.Fatalf("connection %v: %v", l.conns[0].State(), l.conns[0].Err)
	}
}
