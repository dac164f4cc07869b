package transport

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/wire"
)

// TestKeepaliveIdleAlive: two idle connections probe each other once per
// interval of silence and stay up; the timer does not spin.
func TestKeepaliveIdleAlive(t *testing.T) {
	l := newTLink(t, Config{KeepaliveInterval: 100 * time.Millisecond}, 4096)
	l.connect()
	w0 := l.wakeups[0]
	l.run(Time(10*time.Second), nil)
	for i := range 2 {
		if st := l.conns[i].State(); st != StateEstablished {
			t.Fatalf("conn %d %v after 10 s idle: %v", i, st, l.conns[i].Err)
		}
	}
	p := l.eps[0].stats.KeepaliveProbes + l.eps[1].stats.KeepaliveProbes
	// Each probe's ack is a packet heard by the prober, and each probe is
	// one heard by the other side: about one probe per interval between
	// the two of them, never one per side per interval plus.
	if p < 50 || p > 200 {
		t.Errorf("%d keepalive probes in 10 s at 100 ms", p)
	}
	if w := l.wakeups[0] - w0; w > 400 {
		t.Errorf("%d timer wake-ups in 10 s of idle", w)
	}
}

// TestKeepaliveVanishedPeer: a peer that stops answering (its host died)
// fails an idle connection with StatusRetryExceeded after the probes go
// unanswered, within (KeepaliveProbes+1) intervals of its last packet;
// with keepalive off, the connection stays up.
func TestKeepaliveVanishedPeer(t *testing.T) {
	for _, iv := range []time.Duration{200 * time.Millisecond, -1} {
		l := newTLink(t, Config{KeepaliveInterval: iv, KeepaliveProbes: 3}, 4096)
		l.connect()
		l.run(Time(time.Millisecond), nil) // the handshake's PROBE and its ack
		cut := l.now
		l.filter = func(from int, pkt []byte) (bool, Duration) { return from == 1, 0 }
		l.run(Time(5*time.Second), func() bool { return l.done(0, OpClosed) > 0 })
		if iv < 0 {
			if l.done(0, OpClosed) != 0 || l.eps[0].stats.KeepaliveProbes != 0 {
				t.Fatalf("keepalive off: closed %v, %d probes", l.cq[0], l.eps[0].stats.KeepaliveProbes)
			}
			continue
		}
		if l.completions(0, OpClosed, StatusRetryExceeded) != 1 {
			t.Fatalf("idle conn to a vanished peer: %v (state %v)", l.cq[0], l.conns[0].State())
		}
		took := time.Duration(l.now - cut)
		if took < 3*iv || took > 4*iv+10*time.Millisecond {
			t.Errorf("failed %v after the peer vanished, want within 3..4 intervals of %v", took, iv)
		}
		if n := l.eps[0].stats.KeepaliveProbes; n != 3 {
			t.Errorf("%d probes, want 3", n)
		}
	}
}

// TestKeepaliveForgottenConnection: a peer that forgot the connection
// (K18: the listener whose ACCEPT was lost, or a daemon that restarted)
// answers the keepalive PROBE with RESET, which ends it at once.
func TestKeepaliveForgottenConnection(t *testing.T) {
	l := newTLink(t, Config{KeepaliveInterval: 400 * time.Millisecond}, 4096)
	l.connect()
	l.run(Time(time.Millisecond), nil)
	// The peer forgets: its connection closes and its DISCONNECTs are
	// all lost, so it gives up (about a second of retries) and forgets
	// without telling us; the probes outlast that.
	l.filter = func(from int, pkt []byte) (bool, Duration) {
		p, ok := parse(pkt)
		return from == 1 && ok && p.Class == wire.ClassConn && p.Conn().Opcode() == wire.OpDisconnect, 0
	}
	l.conns[1].Close(l.now)
	l.run(Time(3*time.Second), func() bool { return l.done(0, OpClosed) > 0 })
	if l.completions(0, OpClosed, StatusReset) != 1 {
		t.Fatalf("conn to a peer that forgot it: %v (state %v)", l.cq[0], l.conns[0].State())
	}
}

// TestKeepaliveArmedAtHandshake: a connection whose peer vanishes right
// after the handshake, before any data-path packet (the acceptor's PROBE
// lost too), still fails by its keepalive.
func TestKeepaliveArmedAtHandshake(t *testing.T) {
	l := newTLink(t, Config{KeepaliveInterval: 100 * time.Millisecond}, 4096)
	l.filter = func(from int, pkt []byte) (bool, Duration) {
		p, ok := parse(pkt)
		return from == 1 && !(ok && p.Class == wire.ClassConn), 0
	}
	l.connect()
	l.run(Time(2*time.Second), func() bool { return l.done(0, OpClosed) > 0 })
	if l.completions(0, OpClosed, StatusRetryExceeded) != 1 {
		t.Fatalf("initiator of a peer that vanished after its ACCEPT: %v (state %v)", l.cq[0], l.conns[0].State())
	}
}

// TestKeepaliveSpread: connections opened together do not probe
// together. Each interval is KeepaliveInterval less a random part of up
// to a quarter of it, so 64 connections made in the same instant send
// their first keepalive PROBEs spread over most of a quarter interval,
// not in one burst (which, for 10,000 connections, overflowed a
// receiving ring and failed some of them every interval alike).
func TestKeepaliveSpread(t *testing.T) {
	const iv = 100 * time.Millisecond
	l := newTLink(t, Config{KeepaliveInterval: iv, MaxConns: 128}, 4096)
	const n = 64
	for range n {
		if _, err := l.eps[0].Connect(l.now, l.addrs[1], tService, l.mems[0]); err != nil {
			t.Fatal(err)
		}
	}
	l.run(Time(10*time.Millisecond), nil) // handshakes and their PROBEs
	first := map[uint32]Time{}
	l.filter = func(from int, pkt []byte) (bool, Duration) {
		if p, ok := parse(pkt); ok && from == 0 && p.Class == wire.ClassData && p.Data().Opcode() == wire.OpProbe {
			if _, seen := first[p.Data().DstConn()]; !seen {
				first[p.Data().DstConn()] = l.now
			}
		}
		return false, 0
	}
	l.run(Time(2*iv), nil)
	if len(first) < n/2 {
		t.Fatalf("%d of %d connections probed in two intervals", len(first), n)
	}
	lo, hi := Never, Time(0)
	for _, at := range first {
		lo, hi = min(lo, at), max(hi, at)
	}
	if spread := time.Duration(hi - lo); spread < iv/8 {
		t.Errorf("first keepalive PROBEs of %d connections opened together spread over %v, want at least %v", len(first), spread, iv/8)
	}
}
