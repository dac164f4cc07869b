package transport_test

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// TestYoungConnectionsTakeTheEndpointsRTT: connections that each carry
// one WRITE, a few at a time, to a host that answers data after 800 us
// (its acks held, as a descheduled engine's are) but answered the
// handshake at once. A young connection's own estimator has only the
// handshake's round trip, so its tail probe and RTO (the 200 us floor)
// fired before every ack, and every WRITE was resent. An endpoint's
// connections share its host and its peers' hosts: a connection with few
// samples of its own takes at least the endpoint's smoothed RTT and RTO
// (§8.4), so the WRITEs after the first few are sent once.
func TestYoungConnectionsTakeTheEndpointsRTT(t *testing.T) {
	const n, window = 200, 4
	link := sim.DefaultLink
	link.Hold = func(_ sim.Time, pkt []byte) time.Duration {
		if pk, err := wire.Parse(pkt); err == nil && pk.Class == wire.ClassAck {
			return 800 * time.Microsecond
		}
		return 0
	}
	cfg := transport.Config{Congestion: transport.CongestionNone}
	p := newPair(t, cfg, link, 1<<20)
	writes := 0
	p.onA = func(now sim.Time, c transport.Completion) {
		if c.Op == transport.OpWrite && c.Status == transport.StatusOK {
			writes++
		}
	}
	conns := p.connectMany(n)
	src := pattern(1400, 9)
	before := *p.a.EP.Stats()
	posted := 0
	for writes < n {
		for posted < n && posted-writes < window {
			c := conns[posted]
			if err := c.PostWrite(&transport.WorkRequest{WRID: uint64(posted), Local: src, RemoteAddr: regionAddr + uint64(posted)*2048, RKey: p.key}); err != nil {
				t.Fatal(err)
			}
			posted++
		}
		p.kick()
		w := writes
		p.runUntil(time.Second, func() bool { return writes > w })
		if writes == w {
			t.Fatalf("no WRITE completed in 1 s (%d of %d done)", writes, n)
		}
	}
	st := p.a.EP.Stats()
	retx, tos := st.DataRetransmitted-before.DataRetransmitted, st.Timeouts-before.Timeouts
	t.Logf("%d one-packet WRITEs, %d outstanding, acks held 800 us: %d retransmitted, %d timeouts, %d tail probes",
		n, window, retx, tos, st.TailProbes-before.TailProbes)
	if retx > n/10 {
		t.Fatalf("%d of %d WRITEs resent on a lossless link, want at most %d", retx, n, n/10)
	}
}
