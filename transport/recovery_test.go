package transport_test

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// TestHandshakeRTT (§8.4): both ends leave the handshake with a round
// trip to time their first data by, rather than the InitialRTO. The
// initiator samples its CHALLENGE, which echoes its CONNECT; the acceptor
// the PROBE it sends behind its ACCEPT, or, when that is lost, bounds the
// RTT by its ACCEPT and the initiator's first packet. So a lost first
// window from the acceptor is resent after a few round trips, not after
// the 1 ms InitialRTO.
func TestHandshakeRTT(t *testing.T) {
	for _, probeLost := range []bool{false, true} {
		t.Run(map[bool]string{false: "probe", true: "bound"}[probeLost], func(t *testing.T) { handshakeRTT(t, probeLost) })
	}
}

func handshakeRTT(t *testing.T, probeLost bool) {
	var drops int
	armed := false
	var toA uint32 // A's connection id: B's data carries it
	link := sim.DefaultLink
	link.Drop = dropIf(func(now sim.Time, d wire.Data) bool {
		if probeLost && d.Opcode() == wire.OpProbe {
			return true
		}
		if armed && d.DstConn() == toA && d.Flags()&wire.FlagRetx == 0 {
			drops++
			return true
		}
		return false
	})
	p := newPair(t, transport.Config{}, link, 1<<16)
	memA := transport.NewMemoryTable()
	regionA := make([]byte, 1<<16)
	memA.Add(&transport.Region{Key: 0xa11ce, Addr: regionAddr, Buf: regionA, Access: transport.AccessRemoteWrite})
	if _, err := p.a.EP.Connect(p.net.Now(), p.b.Addr, 1, memA); err != nil {
		t.Fatal(err)
	}
	p.a.Kick()
	p.runUntil(time.Second, func() bool { return p.ca != nil && p.cb != nil })
	if p.ca == nil || p.cb == nil {
		t.Fatal("not connected")
	}
	p.idle(100 * time.Microsecond)
	base := 2 * link.Delay
	if rtt := p.ca.Stats().SRTT; rtt < base || rtt > 4*base {
		t.Errorf("initiator's RTT after the handshake %v, want about %v", rtt, base)
	}
	if rtt := p.cb.Stats().SRTT; !probeLost && (rtt < base || rtt > 4*base) {
		t.Errorf("acceptor's RTT after the handshake %v, want about %v", rtt, base)
	} else if probeLost && rtt != 0 {
		t.Fatalf("acceptor has an RTT sample with its probe lost: %v", rtt)
	}
	// A's first packet gives B its bound; then B's first transmissions
	// are all lost.
	p.ca.PostWrite(&transport.WorkRequest{WRID: 1, Local: pattern(64, 1), RemoteAddr: regionAddr, RKey: p.key})
	p.kick()
	p.runUntil(time.Millisecond, func() bool { return count(p.cqA, transport.OpWrite, transport.StatusOK) == 1 })
	toA, armed = p.ca.LocalID(), true
	src := pattern(3*1400, 3)
	start := p.net.Now()
	var done sim.Time
	p.onB = func(now sim.Time, c transport.Completion) {
		if c.Op == transport.OpWrite {
			done = now
		}
	}
	if err := p.cb.PostWrite(&transport.WorkRequest{WRID: 2, Local: src, RemoteAddr: regionAddr, RKey: 0xa11ce}); err != nil {
		t.Fatal(err)
	}
	p.kick()
	p.runUntil(10*time.Millisecond, func() bool { return done != 0 })
	if done == 0 || drops == 0 {
		t.Fatalf("write done %v after %d drops", done != 0, drops)
	}
	took := time.Duration(done - start)
	t.Logf("acceptor's first window lost: completed after %v (InitialRTO %v, MinRTO %v)", took, transport.Defaults.InitialRTO, transport.Defaults.MinRTO)
	if took >= transport.Defaults.InitialRTO/2 {
		t.Errorf("the acceptor's lost first window took %v, as if it had no idea of the RTT", took)
	}
	if string(regionA[:len(src)]) != string(src) {
		t.Error("data differs")
	}
}

// TestDeadPathsInBursts (§8.7.4): three of eight paths drop everything;
// the sender posts one burst at a time, so each burst's packets are sent
// together and nothing is sent after them. A packet on a dead path is
// overdue once a packet sent with it came back on another path and it
// has waited three of its round trips, and its resend goes on a path
// that has delivered: no burst waits for the retransmission timeout.
func TestDeadPathsInBursts(t *testing.T) {
	dead := map[uint16]bool{1: true, 2: true, 5: true}
	link := sim.DefaultLink
	link.Drop = dropIf(func(now sim.Time, d wire.Data) bool { return dead[d.PathID()] })
	p := newPair(t, transport.Config{Paths: 8}, link, 1<<20)
	p.connect()
	const bursts = 40
	src := pattern(8*1400, 7)
	for i := 0; i < bursts; i++ {
		if err := p.ca.PostWrite(&transport.WorkRequest{WRID: uint64(i), Local: src, RemoteAddr: regionAddr + uint64(i)*uint64(len(src))%(1<<20-uint64(len(src))), RKey: p.key}); err != nil {
			t.Fatal(err)
		}
		p.kick()
		p.runUntil(100*time.Millisecond, func() bool { return count(p.cqA, transport.OpWrite, transport.StatusOK) == i+1 })
		if n := count(p.cqA, transport.OpWrite, transport.StatusOK); n != i+1 {
			t.Fatalf("burst %d: %d writes complete", i, n)
		}
	}
	st := p.a.EP.Stats()
	t.Logf("timeouts %d, path timeouts %d, tail probes %d, retransmitted %d, suspected %d",
		st.Timeouts, st.PathTimeouts, st.TailProbes, st.DataRetransmitted, st.PathsSuspected)
	if st.Timeouts != 0 {
		t.Errorf("%d retransmission timeouts: dead paths in a burst were not caught by the path timeout", st.Timeouts)
	}
	if st.PathsSuspected == 0 {
		t.Error("no path suspected")
	}
}
