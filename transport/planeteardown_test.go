package transport

import (
	"errors"
	"testing"
	"time"

	"github.com/metaroce/metaroce/wire"
)

// closedOp is the OpClosed completion of endpoint i's connection, if any.
func (n *planeNet) closedOp(i int) (Completion, bool) {
	for _, c := range n.cq[i] {
		if c.Op == OpClosed {
			return c, true
		}
	}
	return Completion{}, false
}

// TestPlaneTeardownWithoutPlaneZero (§7.7, §7.9): plane 0 of an
// established two-plane connection is cut, and the application closes.
// The teardown finishes at both ends, the closer by the peer's
// DISCONNECT_ACK and the peer by the DISCONNECT, both on plane 1, within
// a few of the connection's RTOs, not after the DISCONNECT's retries
// (seconds) at one end and a keepalive failure at the other. Whether
// plane 0 is already known to be down at the close (data was in flight
// when it went) or not (an idle connection): in the first case the
// first DISCONNECT goes on plane 1, in the second the first resend does.
func TestPlaneTeardownWithoutPlaneZero(t *testing.T) {
	for _, known := range []bool{true, false} {
		n := newPlaneNet(t, [2][]string{{"10.0.0.1", "10.1.0.1"}, {"10.0.0.2", "10.1.0.2"}}, 16<<20)
		n.connect()
		n.run(Time(time.Millisecond), nil) // plane 1 proven at both ends
		n.write(pattern(1<<20, 1), 0)
		n.dead[0] = true
		if known {
			n.write(pattern(4<<20, 2), 1<<20)
			if pl := planeInfo(n.conns[0]); !pl[0].Down || pl[1].Down {
				t.Fatalf("planes %+v after a WRITE with plane 0 cut; want plane 0 down", pl)
			}
		}
		c0, c1 := n.conns[0], n.conns[1]
		rto := Time(n.eps[0].ctlRTO(&c0.snd.rtt))
		start := n.now
		c0.Close(n.now)
		n.run(Time(10*time.Second), func() bool {
			_, a := n.closedOp(0)
			_, b := n.closedOp(1)
			return a && b
		})
		took := n.now - start
		a, okA := n.closedOp(0)
		b, okB := n.closedOp(1)
		t.Logf("plane 0 known down %v: teardown took %v (first DISCONNECT interval %v)", known, time.Duration(took), time.Duration(rto))
		if !okA || !okB || !errors.Is(a.Conn.Err, errClosedLocally) || !errors.Is(b.Conn.Err, errClosedByPeer) ||
			c0.State() != StateClosed || c1.State() != StateClosed {
			t.Fatalf("teardown without plane 0: closer %v (%v), peer %v (%v); want both closed in order", c0.State(), c0.Err, c1.State(), c1.Err)
		}
		limit := 3*rto + Time(time.Millisecond)
		if known {
			limit = Time(time.Millisecond)
		}
		if took > limit {
			t.Fatalf("the teardown took %v; want within %v", time.Duration(took), time.Duration(limit))
		}
		for i := range n.conn {
			for _, pkt := range n.conn[i] {
				if op := wire.Conn(pkt).Opcode(); op == wire.OpDisconnect && i == 1 || op == wire.OpDisconnectAck && i == 0 {
					t.Fatalf("endpoint %d sent %v", i, op)
				}
			}
		}
	}
}

// TestPlaneResetOffPlaneZero (§7.6, §7.9): the peer forgets the
// connection (its daemon restarted, say) while plane 0 is cut. Its RESET
// for the data that still arrives on plane 1 goes back on plane 1, where
// the data came from, and the connection, taking a RESET from the peer's
// proven plane-1 address, fails as reset at once instead of running into
// its retry limit.
func TestPlaneResetOffPlaneZero(t *testing.T) {
	n := newPlaneNet(t, [2][]string{{"10.0.0.1", "10.1.0.1"}, {"10.0.0.2", "10.1.0.2"}}, 16<<20)
	n.connect()
	n.run(Time(time.Millisecond), nil)
	n.write(pattern(1<<20, 1), 0)
	n.dead[0] = true
	n.eps[1].release(n.conns[1]) // forgotten, silently
	c := n.conns[0]
	src := pattern(1<<20, 2)
	n.mems[0].Add(&Region{Key: 0x10c, Addr: 0x700000, Buf: src, Access: AccessLocalWrite})
	if err := c.PostWrite(&WorkRequest{WRID: 1, Local: src, RemoteAddr: regionBase, RKey: regionKey}); err != nil {
		t.Fatal(err)
	}
	n.eps[0].touch(c)
	start := n.now
	n.run(Time(10*time.Second), func() bool { return c.State() == StateFailed })
	t.Logf("reset %v after the WRITE was posted; %d resets sent", time.Duration(n.now-start), n.eps[1].Stats().ResetsSent)
	if c.State() != StateFailed || !errors.Is(c.Err, errReset) || n.now-start > Time(time.Millisecond) {
		t.Fatalf("connection %v (%v) %v after the peer forgot it; want reset within 1 ms", c.State(), c.Err, time.Duration(n.now-start))
	}
}
