package transport

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/wire"
)

// planeNet is two endpoints wired to each other by one link per plane,
// driven in virtual time: a packet leaves from its sender's address on
// the datagram's plane and must be addressed to the receiver's address on
// that plane (planes share no switch, §7.9), or the test fails.
type planeNet struct {
	tb      testing.TB
	now     Time
	eps     [2]*Endpoint
	addrs   [2][]netip.Addr // per plane; [0] is the endpoint's own
	conns   [2]*Conn
	mems    [2]*MemoryTable
	regions [2][]byte
	q       []ppkt
	// dead planes drop everything, and a plane's packets from endpoint
	// 0 take extra longer; sent counts data packets (not probes) per sender and
	// plane; conn keeps every conn packet sent.
	dead   [MaxPlanes]bool
	extra  [MaxPlanes]Time
	lastAt [2][MaxPlanes]Time
	// ackExtra delays everything endpoint 1 sends, on every plane: a
	// receiver that stops answering for a while (descheduled).
	ackExtra Time
	// frozen: until then endpoint 1 runs nothing (its host paused it):
	// what reaches it waits in held, its timers wait.
	frozen Time
	held   []ppkt
	// stamped: what was held reaches endpoint 1 with its arrival time,
	// as an AF_XDP host's XDP program stamps it (§4.2), so the acks'
	// AckDelay counts the pause; without it the pause is not in them.
	stamped bool
	// reviveOnTimeout: the dead planes answer again from the first
	// retransmission timeout of endpoint 0 on.
	reviveOnTimeout bool
	// reroute[i][p]: what endpoint i sends on plane p leaves on plane 0
	// instead, from its plane-0 address (a host whose routing sends a
	// port's traffic out of another).
	reroute [2][MaxPlanes]bool
	// mute[i][p]: what endpoint i sends on plane p is lost (a port that
	// receives but cannot send).
	mute  [2][MaxPlanes]bool
	sent  [2][MaxPlanes]int
	probe [2][MaxPlanes]int
	conn  [2][][]byte
	cq    [2][]Completion
	buf   []byte
	cqBuf []Completion
}

// ppkt is a packet in flight on a plane.
type ppkt struct {
	tpkt
	plane int
}

func newPlaneNet(tb testing.TB, planes [2][]string, regionSize int) *planeNet {
	n := &planeNet{tb: tb}
	for i := range n.eps {
		var as []netip.Addr
		for _, s := range planes[i] {
			var a netip.Addr
			if s != "" {
				a = netip.MustParseAddr(s)
			}
			as = append(as, a)
		}
		n.addrs[i] = as
		cfg := Defaults
		cfg.Seed = uint64(i + 1)
		cfg.Planes = len(as)
		ep, err := NewEndpoint(cfg, as[0])
		if err != nil {
			tb.Fatal(err)
		}
		if err := ep.SetPlaneAddrs(as); err != nil {
			tb.Fatal(err)
		}
		n.eps[i] = ep
		n.regions[i] = make([]byte, regionSize)
		n.mems[i] = NewMemoryTable()
		n.mems[i].Add(&Region{Key: regionKey, Addr: regionBase, Buf: n.regions[i],
			Access: AccessRemoteWrite | AccessRemoteRead | AccessLocalWrite})
	}
	n.buf = make([]byte, n.eps[0].MaxPacket())
	n.cqBuf = make([]Completion, 64)
	n.eps[1].Listen(tService, n.mems[1])
	return n
}

func (n *planeNet) connect() {
	n.tb.Helper()
	if _, err := n.eps[0].Connect(n.now, n.addrs[1][0], tService, n.mems[0]); err != nil {
		n.tb.Fatal(err)
	}
	n.run(Time(time.Second), func() bool { return n.conns[0] != nil && n.conns[1] != nil })
	if n.conns[0] == nil || n.conns[1] == nil {
		n.tb.Fatalf("not connected: %v %v", n.cq[0], n.cq[1])
	}
}

func (n *planeNet) flush() {
	for i, ep := range n.eps {
		if i == 1 && n.now < n.frozen {
			continue
		}
		for {
			d, ok := ep.Transmit(n.now, n.buf)
			if !ok {
				break
			}
			n.send(i, d, n.buf[:d.Len])
		}
		for {
			k := ep.PollCompletions(n.cqBuf)
			if k == 0 {
				break
			}
			for _, c := range n.cqBuf[:k] {
				if c.Op == OpConnected {
					n.conns[i] = c.Conn
				}
				n.cq[i] = append(n.cq[i], c)
			}
		}
	}
}

func (n *planeNet) send(from int, d Datagram, pkt []byte) {
	to := 1 - from
	pl := int(d.Plane)
	if pl >= len(n.addrs[from]) || !n.addrs[from][pl].IsValid() {
		n.tb.Fatalf("endpoint %d sent on plane %d, where it has no port", from, pl)
	}
	if pl >= len(n.addrs[to]) || d.Dst != n.addrs[to][pl] {
		n.tb.Fatalf("endpoint %d sent to %v on plane %d: not the peer's address there (%v)", from, d.Dst, pl, n.addrs[to])
	}
	p, err := wire.Parse(pkt)
	if err != nil {
		n.tb.Fatalf("endpoint %d sent a bad packet: %v", from, err)
	}
	switch {
	case p.Class == wire.ClassConn:
		switch op := p.Conn().Opcode(); {
		case pl == 0:
		case op == wire.OpDisconnect || op == wire.OpDisconnectAck || op == wire.OpReset:
			// An established connection's teardown may leave plane 0
			// (§7.7, §7.9); replies leave on the plane they answer.
		default:
			n.tb.Fatalf("conn packet %v on plane %d", op, pl)
		}
		n.conn[from] = append(n.conn[from], append([]byte(nil), pkt...))
	case p.Class == wire.ClassData && p.Data().Opcode() == wire.OpProbe:
		n.probe[from][pl]++
	case p.Class == wire.ClassData:
		n.sent[from][pl]++
	}
	if n.reviveOnTimeout && n.eps[0].Stats().Timeouts > 0 {
		n.dead = [MaxPlanes]bool{}
	}
	if n.reroute[from][pl] {
		pl = 0
	}
	if n.dead[pl] || n.mute[from][pl] {
		return
	}
	// A plane is a FIFO from each sender: when its extra delay ends,
	// what is sent next still waits behind what the delay holds.
	at := n.now + Time(2*time.Microsecond)
	if from == 0 {
		at += n.extra[pl] // the data's direction
	} else {
		at += n.ackExtra
	}
	at = max(at, n.lastAt[from][pl])
	n.lastAt[from][pl] = at
	q := ppkt{tpkt{at: at, from: from, to: to, port: d.SrcPort, b: append([]byte(nil), pkt...)}, pl}
	i := len(n.q)
	for i > 0 && n.q[i-1].at > q.at {
		i--
	}
	n.q = append(n.q, ppkt{})
	copy(n.q[i+1:], n.q[i:])
	n.q[i] = q
}

func (n *planeNet) step(until Time) bool {
	n.flush()
	next := until + 1
	if len(n.q) > 0 {
		next = n.q[0].at
	}
	for i, ep := range n.eps {
		if i == 1 && n.now < n.frozen {
			next = min(next, n.frozen)
			continue
		}
		next = min(next, ep.NextTimeout())
	}
	if next > until {
		return false
	}
	n.now = max(n.now, next)
	if n.now >= n.frozen && len(n.held) > 0 {
		// A host's engine resuming takes its receive ring in batches,
		// sending what each batch owes before the next: the first acks
		// answer the oldest packets.
		for i, p := range n.held {
			at := Time(0)
			if n.stamped {
				at = p.at
			}
			n.eps[p.to].ReceiveOn(n.now, at, uint8(p.plane), n.addrs[p.from][p.plane], p.port, false, p.b)
			if i%16 == 15 {
				n.flush()
			}
		}
		n.held = n.held[:0]
	}
	for len(n.q) > 0 && n.q[0].at <= n.now {
		p := n.q[0]
		n.q = n.q[1:]
		if p.to == 1 && n.now < n.frozen {
			n.held = append(n.held, p)
			continue
		}
		pl := p.plane
		n.eps[p.to].ReceiveOn(n.now, 0, uint8(pl), n.addrs[p.from][pl], p.port, false, p.b)
	}
	for i, ep := range n.eps {
		if i == 1 && n.now < n.frozen {
			continue
		}
		if ep.NextTimeout() <= n.now {
			ep.Timeout(n.now)
		}
	}
	n.flush()
	return true
}

func (n *planeNet) run(d Time, cond func() bool) {
	until := n.now + d
	for {
		if cond != nil && cond() {
			return
		}
		if !n.step(until) {
			n.now = until
			return
		}
	}
}

// write posts one WRITE of src to the peer's region and runs until it
// completes; it fails the test unless the data arrived intact.
func (n *planeNet) write(src []byte, off uint64) {
	n.tb.Helper()
	n.mems[0].Add(&Region{Key: 0x10c, Addr: 0x700000, Buf: src, Access: AccessLocalWrite})
	before := n.doneWrites()
	if err := n.conns[0].PostWrite(&WorkRequest{WRID: 1, Local: src, RemoteAddr: regionBase + off, RKey: regionKey}); err != nil {
		n.tb.Fatal(err)
	}
	n.eps[0].touch(n.conns[0])
	n.run(Time(10*time.Second), func() bool { return n.doneWrites() > before })
	if n.doneWrites() == before {
		n.tb.Fatalf("WRITE did not complete")
	}
	if c := n.cq[0][len(n.cq[0])-1]; c.Status != StatusOK {
		n.tb.Fatalf("WRITE completed with %v", c.Status)
	}
	if !bytes.Equal(n.regions[1][off:off+uint64(len(src))], src) {
		n.tb.Fatalf("the data did not arrive intact")
	}
}

func (n *planeNet) doneWrites() int {
	k := 0
	for _, c := range n.cq[0] {
		if c.Op == OpWrite {
			k++
		}
	}
	return k
}

func planeInfo(c *Conn) []PlaneInfo { return c.Planes(nil) }

// TestPlanesSpray: two hosts of two planes each learn each other's plane
// addresses in the handshake (the application named only plane 0's), put
// path i on plane i mod 2, and a WRITE's packets go half on each plane,
// every one between the two ends' addresses on its plane (planeNet checks
// that per packet).
func TestPlanesSpray(t *testing.T) {
	n := newPlaneNet(t, [2][]string{{"10.0.0.1", "10.1.0.1"}, {"10.0.0.2", "10.1.0.2"}}, 8<<20)
	n.connect()
	for i, want := range [][]PlaneInfo{
		{{Plane: 0, Peer: n.addrs[1][0]}, {Plane: 1, Peer: n.addrs[1][1]}},
		{{Plane: 0, Peer: n.addrs[0][0]}, {Plane: 1, Peer: n.addrs[0][1]}},
	} {
		if got := planeInfo(n.conns[i]); len(got) != 2 || got[0].Plane != want[0].Plane || got[0].Peer != want[0].Peer ||
			got[1].Plane != want[1].Plane || got[1].Peer != want[1].Peer {
			t.Fatalf("endpoint %d planes %v, want %v", i, got, want)
		}
	}
	// CONNECT and ACCEPT carry one plane address each (§7.9).
	for i := range n.conn {
		for _, b := range n.conn[i] {
			c := wire.Conn(b)
			if op := c.Opcode(); (op == wire.OpConnect || op == wire.OpAccept) &&
				(c.PlaneAddrs() != 1 || !bytes.Equal(c.PlaneAddr(0), n.addrs[i][1].AsSlice()) && netip.AddrFrom16([16]byte(c.PlaneAddr(0))).Unmap() != n.addrs[i][1]) {
				t.Fatalf("endpoint %d %v announces %d planes % x", i, op, c.PlaneAddrs(), b[84:len(b)-4])
			}
		}
	}
	for i, p := range n.conns[0].Paths(nil) {
		if p.Plane != i%2 {
			t.Fatalf("path %d on plane %d", i, p.Plane)
		}
	}
	n.write(pattern(4<<20, 3), 0)
	a, b := n.sent[0][0], n.sent[0][1]
	if share := float64(a) / float64(a+b); share < 0.4 || share > 0.6 {
		t.Fatalf("plane 0 carried %d of %d data packets", a, a+b)
	}
	if n.sent[1][0]+n.sent[1][1] != 0 {
		t.Fatalf("the receiver sent data")
	}
}

// TestPlanesSinglePlanePeer: a two-plane host and a single-plane one use
// plane 0 only, and the single-plane end's handshake packets carry no
// plane addresses: they are what a single-plane endpoint always sent.
func TestPlanesSinglePlanePeer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		planes [2][]string
	}{
		{"initiator-one-plane", [2][]string{{"10.0.0.1"}, {"10.0.0.2", "10.1.0.2"}}},
		{"listener-one-plane", [2][]string{{"10.0.0.1", "10.1.0.1"}, {"10.0.0.2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newPlaneNet(t, tc.planes, 1<<20)
			n.connect()
			for i := range n.conns {
				if got := planeInfo(n.conns[i]); len(got) != 1 || got[0].Plane != 0 {
					t.Fatalf("endpoint %d planes %v, want plane 0 only", i, got)
				}
			}
			single := 0
			if len(tc.planes[1]) == 1 {
				single = 1
			}
			for _, b := range n.conn[single] {
				if len(b) != wire.ConnLen+wire.Conn(b).PrivateLen()+wire.TrailerLen || binary16(b[80:]) != 0 {
					t.Fatalf("single-plane end sent % x", b)
				}
			}
			n.write(pattern(256<<10, 5), 0)
			if n.sent[0][1] != 0 {
				t.Fatalf("%d data packets on plane 1", n.sent[0][1])
			}
		})
	}
}

func binary16(b []byte) int { return int(b[0])<<8 | int(b[1]) }

// TestPlanesMissingPlane: three planes at the initiator, and the listener
// has a port on plane 2 but none on plane 1: the connection sprays over
// planes 0 and 2, path i on [0 2][i mod 2].
func TestPlanesMissingPlane(t *testing.T) {
	n := newPlaneNet(t, [2][]string{{"10.0.0.1", "10.1.0.1", "10.2.0.1"}, {"10.0.0.2", "", "10.2.0.2"}}, 1<<20)
	n.connect()
	got := planeInfo(n.conns[0])
	if len(got) != 2 || got[0].Plane != 0 || got[1].Plane != 2 || got[1].Peer != n.addrs[1][2] {
		t.Fatalf("planes %v, want 0 and 2", got)
	}
	n.write(pattern(512<<10, 7), 0)
	if n.sent[0][1] != 0 || n.sent[0][2] == 0 || n.sent[0][0] == 0 {
		t.Fatalf("data per plane %v", n.sent[0])
	}
}

// TestPlanesWrongAddress: a packet of the connection from an address that
// is none of the peer's plane addresses is dropped as from the wrong peer,
// while one from the peer's plane-1 address is taken.
func TestPlanesWrongAddress(t *testing.T) {
	n := newPlaneNet(t, [2][]string{{"10.0.0.1", "10.1.0.1"}, {"10.0.0.2", "10.1.0.2"}}, 1<<20)
	n.connect()
	c := n.conns[1]
	h := wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq, DstConn: c.localID, PathID: 1, PathSeq: 1, Timestamp: uint64(n.now)}
	pkt := wire.AppendData(nil, &h, nil)
	before := n.eps[1].Stats().RxWrongPeer
	n.eps[1].Receive(n.now, netip.MustParseAddr("10.9.0.1"), false, pkt)
	if n.eps[1].Stats().RxWrongPeer != before+1 {
		t.Fatalf("a packet from a stranger's address was not dropped as from the wrong peer")
	}
	n.eps[1].Receive(n.now, n.addrs[0][1], false, pkt)
	if n.eps[1].Stats().RxWrongPeer != before+1 {
		t.Fatalf("a packet from the peer's plane-1 address was dropped")
	}
}

// TestPlaneDeadMidTransfer: plane 1 goes dark in the middle of a series of
// WRITEs; every WRITE still completes intact, and once its paths are
// suspect plane 1 is down (§8.7.4) and carries probes, not data. When it
// answers again, the first restored path brings the plane up and every
// other path of it is probed at once: the whole plane is back within one
// MaxProbeInterval and a few round trips, not one backed-off interval per
// path.
func TestPlaneDeadMidTransfer(t *testing.T) {
	n := newPlaneNet(t, [2][]string{{"10.0.0.1", "10.1.0.1"}, {"10.0.0.2", "10.1.0.2"}}, 16<<20)
	n.connect()
	n.write(pattern(2<<20, 1), 0)
	n.dead[1] = true
	n.write(pattern(2<<20, 2), 2<<20)
	before := n.sent[0][1]
	probes := n.probe[0][1]
	n.write(pattern(4<<20, 4), 4<<20)
	if n.sent[0][1] != before {
		t.Fatalf("%d data packets went on the dead plane after its paths were suspect", n.sent[0][1]-before)
	}
	if n.probe[0][1] == probes {
		t.Fatalf("the dead plane was not probed")
	}
	pl := planeInfo(n.conns[0])
	if !pl[1].Down || pl[1].ActivePaths != 0 || pl[0].Down || pl[0].ActivePaths != pl[0].Paths || n.eps[0].Stats().PlanesDown != 1 {
		t.Fatalf("planes %+v, %d planes down; want plane 1 down, plane 0 whole", pl, n.eps[0].Stats().PlanesDown)
	}
	// Let the probes back off to MaxProbeInterval, then restore.
	n.run(Time(100*time.Millisecond), nil)
	// Put every path of plane 1 but its first 40 ms out of phase with it, as paths whose faults began at different times
	// would be; the plane's return must not wait for each one's turn.
	first := true
	for i := range n.conns[0].snd.paths {
		if p := &n.conns[0].snd.paths[i]; p.plane == 1 {
			if !first {
				p.probeInterval, p.probeAt = 40*time.Millisecond, n.now+Time(40*time.Millisecond)
			}
			first = false
		}
	}
	n.dead[1] = false
	restored := n.now
	cfg := n.eps[0].Config()
	for planeInfo(n.conns[0])[1].ActivePaths < planeInfo(n.conns[0])[1].Paths && n.now-restored < Time(time.Second) {
		n.run(Time(100*time.Microsecond), nil)
	}
	took := time.Duration(n.now - restored)
	t.Logf("plane 1 whole again %v after it answered (MaxProbeInterval %v)", took, cfg.MaxProbeInterval)
	if took > cfg.MaxProbeInterval+2*time.Millisecond || n.eps[0].Stats().PlanesUp != 1 {
		t.Fatalf("plane 1's paths all active %v after the plane answered again, %d planes up", took, n.eps[0].Stats().PlanesUp)
	}
	n.write(pattern(4<<20, 6), 8<<20)
	if n.sent[0][1] == before {
		t.Fatalf("plane 1 carried no data after it came back")
	}
}

// TestPlaneQueueBurstNotDown: queueing holds a plane's paths back
// together (the plane's own switches, §7.9). A sudden burst of it, half
// again as long as a path timeout, is not a dead route, whether it hits
// one plane while the other plane's acks keep coming, or every path of
// the connection at once: no path times out and no plane goes down
// (§8.7.4). Before, every path of the plane timed out (the receiver holds
// each path's ack up to AckDelay, so a later packet's ack came back first
// and its companions, now slower than three old RTTs, were "overdue"),
// was found slow against the other plane's, and the plane went down, tens
// of times a run in demo -topology planes.
func TestPlaneQueueBurstNotDown(t *testing.T) {
	for _, both := range []bool{false, true} {
		n := newPlaneNet(t, [2][]string{{"10.0.0.1", "10.1.0.1"}, {"10.0.0.2", "10.1.0.2"}}, 16<<20)
		n.connect()
		n.write(pattern(1<<20, 1), 0)
		c := n.conns[0]
		var worst Duration
		for i := range c.snd.paths {
			worst = max(worst, c.pathTimeout(&c.snd.paths[i]))
		}
		src := pattern(4<<20, 2)
		n.mems[0].Add(&Region{Key: 0x10c, Addr: 0x700000, Buf: src, Access: AccessLocalWrite})
		if err := c.PostWrite(&WorkRequest{WRID: 1, Local: src, RemoteAddr: regionBase + 1<<20, RKey: regionKey}); err != nil {
			t.Fatal(err)
		}
		n.eps[0].touch(c)
		n.run(Time(200*time.Microsecond), nil) // in full flow on both planes
		burst := Time(worst) * 3 / 2
		n.extra[1] = burst
		if both {
			n.extra[0] = burst
		}
		n.run(Time(2*time.Millisecond), nil)
		n.extra = [MaxPlanes]Time{}
		n.run(Time(10*time.Second), func() bool { return n.doneWrites() == 2 })
		if n.doneWrites() != 2 || !bytes.Equal(n.regions[1][1<<20:5<<20], src) {
			t.Fatalf("the WRITE did not complete intact")
		}
		st := n.eps[0].Stats()
		t.Logf("burst %v on plane 1 (both planes %v; path timeout %v): %d path timeouts, %d planes down, %d retransmitted",
			time.Duration(burst), both, worst, st.PathTimeouts, st.PlanesDown, c.Stats().Retransmitted)
		if st.PlanesDown != 0 || st.PathTimeouts != 0 {
			t.Fatalf("a queueing burst of 1.5 path timeouts (both planes %v): %d path timeouts, %d planes down; want none", both, st.PathTimeouts, st.PlanesDown)
		}
	}
}

// twoPlanesMidWrite connects two hosts of two planes, completes a first
// WRITE, and leaves an 8 MiB WRITE (WRID 1, to regionBase + 1 MiB) 200 us
// into its flow.
func twoPlanesMidWrite(t *testing.T) (*planeNet, *Conn, []byte) {
	n := newPlaneNet(t, [2][]string{{"10.0.0.1", "10.1.0.1"}, {"10.0.0.2", "10.1.0.2"}}, 16<<20)
	n.connect()
	n.write(pattern(1<<20, 1), 0)
	c := n.conns[0]
	src := pattern(8<<20, 2)
	n.mems[0].Add(&Region{Key: 0x10c, Addr: 0x700000, Buf: src, Access: AccessLocalWrite})
	if err := c.PostWrite(&WorkRequest{WRID: 1, Local: src, RemoteAddr: regionBase + 1<<20, RKey: regionKey}); err != nil {
		t.Fatal(err)
	}
	n.eps[0].touch(c)
	n.run(Time(200*time.Microsecond), nil)
	return n, c, src
}

// TestTimeoutSweepSuspectsNoPath: when the receiver goes quiet on every
// plane at once (its host paused it) for longer than the retransmission
// timeout, the timeout declares the old transmissions of every path lost
// (§8.4), but that is no evidence against any path: none becomes suspect
// and no plane goes down (§8.7.4). Counted, each path's three lost
// packets suspected them all and took both planes down together.
func TestTimeoutSweepSuspectsNoPath(t *testing.T) {
	n, c, src := twoPlanesMidWrite(t)
	pause := 3 * Time(c.snd.rto)
	n.ackExtra = pause
	n.run(Time(50*time.Microsecond), nil)
	n.ackExtra = 0
	n.run(Time(10*time.Second), func() bool { return n.doneWrites() == 2 })
	if n.doneWrites() != 2 || !bytes.Equal(n.regions[1][1<<20:9<<20], src) {
		t.Fatalf("the WRITE did not complete intact")
	}
	st := n.eps[0].Stats()
	t.Logf("receiver silent %v: %d timeouts, %d lost, %d paths suspected (%d path timeouts, %d slow), %d planes down", time.Duration(pause), st.Timeouts, st.LostDetected, st.PathsSuspected, st.PathTimeouts, st.PathsSlow, st.PlanesDown)
	if st.Timeouts == 0 {
		t.Fatalf("no retransmission timeout: the pause did not test anything")
	}
	// What follows the pause may still time a path out or find it slow
	// (its acks come back in one burst, late), but no path may be
	// suspected for the losses the timeout declared: each suspicion needs
	// a path timeout or a slow verdict of its own.
	if st.PlanesDown != 0 || st.PathsSuspected > st.PathTimeouts+st.PathsSlow {
		t.Fatalf("after a timeout: %d paths suspected (%d path timeouts), %d planes down; want none down, no suspicion without a path timeout or slowness",
			st.PathsSuspected, st.PathTimeouts, st.PlanesDown)
	}
}

// TestPauseIsNotLoss (§8.4): when the receiver's host pauses it for longer
// than one RTO but less than two (it runs nothing), the first expiry
// resends the oldest PSN alone, the acks of the originals then show the
// silence was a pause, and nothing else is resent. When the silence is
// loss instead (every packet dropped for a while), the ack of that one
// retransmission is what shows it, and the sweep runs then, without
// waiting for a second expiry.
func TestPauseIsNotLoss(t *testing.T) {
	start := func() (*planeNet, *Conn, []byte) { return twoPlanesMidWrite(t) }
	finish := func(n *planeNet, src []byte) {
		n.run(Time(10*time.Second), func() bool { return n.doneWrites() == 2 })
		if n.doneWrites() != 2 || !bytes.Equal(n.regions[1][1<<20:9<<20], src) {
			t.Fatalf("the WRITE did not complete intact")
		}
	}

	n, c, src := start()
	pause := Time(c.snd.rto) * 3 / 2
	n.frozen = n.now + pause
	// Up to the expiry, and what it declared lost: the oldest PSN only.
	var before uint64
	for n.eps[0].Stats().Timeouts == 0 && n.now < n.frozen {
		before = n.eps[0].Stats().LostDetected
		n.step(n.frozen)
	}
	atExpiry := n.eps[0].Stats().LostDetected
	finish(n, src)
	st := n.eps[0].Stats()
	t.Logf("receiver paused %v: %d timeouts (%d found a pause), %d lost before the expiry, %d at it, %d after it",
		time.Duration(pause), st.Timeouts, st.SpuriousTimeouts, before, atExpiry-before, st.LostDetected-atExpiry)
	// (Before it, path timeouts may declare the packets whose acks the
	// pause caught: a pause that begins with no ack at all in flight
	// looks like the end of a burst on a dead path, §8.7.4.)
	if st.Timeouts != 1 || st.SpuriousTimeouts != 1 || atExpiry-before > 1 || st.LostDetected-atExpiry > 2 {
		t.Fatalf("a pause of 1.5 RTOs: %d timeouts, %d found a pause, %d lost at the expiry and %d after; want 1, 1, the oldest PSN, and no sweep",
			st.Timeouts, st.SpuriousTimeouts, atExpiry-before, st.LostDetected-atExpiry)
	}
	// Nor does the controller take the pause for a timeout: its window
	// did not collapse to one packet.
	if cs := c.snd.cc.State(); cs.Timeouts != 0 {
		t.Fatalf("the controller was told of %d timeouts for a pause (window %d bytes)", cs.Timeouts, cs.Window)
	}

	// Everything in flight dropped, and the tail probe with it; the
	// planes answer again from the expiry on, so only what it sends
	// gets through.
	n, c, src = start()
	n.dead[0], n.dead[1] = true, true
	n.reviveOnTimeout = true
	n.run(Time(2*c.snd.rto), func() bool { return n.eps[0].Stats().Timeouts == 1 })
	atExpiry = n.eps[0].Stats().LostDetected
	n.run(Time(c.snd.rto)/2, nil) // the oldest PSN's round trip and the next ack's, well inside the doubled RTO
	st = n.eps[0].Stats()
	t.Logf("everything dropped: %d timeouts (%d found a pause), %d lost at the expiry, %d more half an RTO later", st.Timeouts, st.SpuriousTimeouts, atExpiry, st.LostDetected-atExpiry)
	if st.Timeouts != 1 || st.SpuriousTimeouts != 0 || st.LostDetected <= atExpiry+16 {
		t.Fatalf("after a loss of everything: %d timeouts, %d found a pause, lost %d then %d more; want the sweep on the acks of what the expiry sent", st.Timeouts, st.SpuriousTimeouts, atExpiry, st.LostDetected-atExpiry)
	}
	// A silence the acks call loss reaches the controller as a timeout.
	if cs := c.snd.cc.State(); cs.Timeouts != 1 {
		t.Fatalf("the controller was told of %d timeouts after a loss of everything, want 1", cs.Timeouts)
	}
	finish(n, src)
}

// pause pauses the receiver's host for d, runs 100 us past it, and
// returns the sender's counters.
func (n *planeNet) pause(d Time) *Stats {
	n.frozen = n.now + d
	n.run(d+Time(100*time.Microsecond), nil)
	return n.eps[0].Stats()
}

// TestPauseRaisesTheRTO: a pause the acks proved (§8.4) becomes the RTO's
// floor, so the receiver's next pause of the same length, while data
// flows, fires no timer and resends nothing; the allowance then halves
// each allowanceHalfLife. (On two shared vCPUs engines are descheduled for
// milliseconds again and again: with an RTO of a few hundred
// microseconds each pause was a timeout, and 30 of 54 in a lossless demo
// run swept everything in flight, every resend a duplicate.)
func TestPauseRaisesTheRTO(t *testing.T) {
	n, c, src := twoPlanesMidWrite(t)
	pause := Time(c.snd.rto) * 3 / 2
	st := n.pause(pause)
	if st.Timeouts != 1 || st.SpuriousTimeouts != 1 {
		t.Fatalf("the first pause: %d timeouts, %d found a pause; want 1 and 1", st.Timeouts, st.SpuriousTimeouts)
	}
	if a := c.snd.pause.get(n.now); a < Duration(pause) {
		t.Fatalf("pause allowance %v after a %v pause", a, time.Duration(pause))
	}
	if n.doneWrites() == 2 {
		t.Fatal("the WRITE ended before the second pause")
	}
	lost := st.LostDetected
	st = n.pause(pause)
	t.Logf("RTO %v after the second pause of %v; %d timeouts, %d more lost", c.snd.rto, time.Duration(pause), st.Timeouts, st.LostDetected-lost)
	if st.Timeouts != 1 {
		t.Fatalf("the second pause of %v fired the RTO: %d timeouts", time.Duration(pause), st.Timeouts)
	}
	n.run(Time(10*time.Second), func() bool { return n.doneWrites() == 2 })
	if n.doneWrites() != 2 || !bytes.Equal(n.regions[1][1<<20:9<<20], src) {
		t.Fatal("the WRITE did not complete intact")
	}
	a := c.snd.pause.get(n.now)
	if b := c.snd.pause.get(n.now + 2*Time(allowanceHalfLife)); b != a/4 {
		t.Fatalf("two half-lives later the allowance is %v, want a quarter of %v", b, a)
	}
	if b := c.snd.pause.get(n.now + 40*Time(allowanceHalfLife)); b != 0 {
		t.Fatalf("forty half-lives later the allowance is %v", b)
	}
}

// TestLongPauseProvenAfterASweep: a receiver paused past the second
// expiry with no pause seen before is swept, as a dead route would be
// (§8.4), but the acks that follow still prove the pause, from the first
// expiry's timer on, and it becomes the RTO's floor.
func TestLongPauseProvenAfterASweep(t *testing.T) {
	n, c, src := twoPlanesMidWrite(t)
	pause := 4 * Time(c.snd.rto)
	st := n.pause(pause)
	if st.Timeouts != 2 {
		t.Fatalf("a pause of 4 RTOs: %d timeouts, want 2 (the first, and the second that swept)", st.Timeouts)
	}
	if a := c.snd.pause.get(n.now); a < Duration(pause) {
		t.Fatalf("pause allowance %v after a %v pause that was swept", a, time.Duration(pause))
	}
	n.run(Time(10*time.Second), func() bool { return n.doneWrites() == 2 })
	if n.doneWrites() != 2 || !bytes.Equal(n.regions[1][1<<20:9<<20], src) {
		t.Fatal("the WRITE did not complete intact")
	}
}

// TestNoSweepOncePausesSeen: once a connection has seen its hosts pause,
// a pause that outlasts its RTO floor by far resends only the oldest PSN
// at each expiry, instead of sweeping everything in flight at the second.
func TestNoSweepOncePausesSeen(t *testing.T) {
	n, c, src := twoPlanesMidWrite(t)
	st := n.pause(Time(c.snd.rto) * 3 / 2)
	if st.SpuriousTimeouts != 1 || c.snd.pause.get(n.now) == 0 {
		t.Fatalf("the first pause: %d found a pause, allowance %v", st.SpuriousTimeouts, c.snd.pause.get(n.now))
	}
	lost, timeouts, inflight := st.LostDetected, st.Timeouts, c.snd.inflight
	long := 4 * Time(c.snd.rto)
	st = n.pause(long)
	t.Logf("%d in flight, then a pause of %v: %d more timeouts, %d more lost", inflight, time.Duration(long), st.Timeouts-timeouts, st.LostDetected-lost)
	if st.Timeouts-timeouts < 2 || inflight < 16 {
		t.Fatalf("the second pause tests nothing: %d expiries, %d in flight", st.Timeouts-timeouts, inflight)
	}
	// Each expiry resends the oldest PSN, and path timeouts declare the
	// tail whose acks the pause caught (TestPauseIsNotLoss): 25 here.
	// A sweep loses everything in flight and what the expiries resent:
	// 72.
	if more := st.LostDetected - lost; more >= uint64(inflight) {
		t.Fatalf("the second pause lost %d transmissions over %d expiries, with %d in flight: swept", more, st.Timeouts-timeouts, inflight)
	}
	n.run(Time(10*time.Second), func() bool { return n.doneWrites() == 2 })
	if n.doneWrites() != 2 || !bytes.Equal(n.regions[1][1<<20:9<<20], src) {
		t.Fatal("the WRITE did not complete intact")
	}
}

// TestHoldAllowance: the receiver's hold the sender allows for (§8.7.4)
// follows the longest AckDelay its acks reported, never below the
// configured AckDelay, never above the RTO, fading by half each second.
func TestHoldAllowance(t *testing.T) {
	n, c, _ := twoPlanesMidWrite(t)
	if got, seen := c.holdAllowance(n.now), c.snd.hold.get(n.now); got != max(c.ep.cfg.AckDelay, seen) || seen > c.snd.rto {
		t.Fatalf("after a clean transfer: allowance %v, longest hold seen %v, RTO %v", got, seen, c.snd.rto)
	}
	now := n.now + Time(time.Millisecond)
	c.snd.hold = allowance{}
	if got := c.holdAllowance(now); got != c.ep.cfg.AckDelay {
		t.Fatalf("no hold seen: allowance %v, want AckDelay %v", got, c.ep.cfg.AckDelay)
	}
	c.snd.hold.raise(now, c.snd.rto/2)
	if got := c.holdAllowance(now); got != c.snd.rto/2 {
		t.Fatalf("a hold of half the RTO: allowance %v", got)
	}
	c.snd.hold.raise(now, 10*c.snd.rto)
	if got := c.holdAllowance(now); got != c.snd.rto {
		t.Fatalf("a hold of 10 RTOs: allowance %v, want the RTO %v", got, c.snd.rto)
	}
	c.snd.hold = allowance{}
	c.snd.hold.raise(now, 400*time.Microsecond)
	if got := c.holdAllowance(now + Time(allowanceHalfLife)); got != max(c.ep.cfg.AckDelay, min(200*time.Microsecond, c.snd.rto)) {
		t.Fatalf("a second after a hold of 400 us: allowance %v", got)
	}
}
