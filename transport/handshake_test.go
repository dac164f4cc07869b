package transport_test

import (
	"encoding/hex"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

var (
	addrS = netip.MustParseAddr("10.1.0.1")
	addrC = netip.MustParseAddr("10.1.0.2")
)

func listener(t *testing.T) *transport.Endpoint {
	t.Helper()
	e, err := transport.NewEndpoint(transport.Config{Seed: 42}, addrS)
	if err != nil {
		t.Fatal(err)
	}
	e.Listen(9, transport.NewMemoryTable())
	return e
}

// drain returns every packet e owes now, parsed.
func drain(t *testing.T, e *transport.Endpoint, now transport.Time) []wire.Packet {
	t.Helper()
	var out []wire.Packet
	for {
		buf := make([]byte, e.MaxPacket())
		d, ok := e.Transmit(now, buf)
		if !ok {
			return out
		}
		p, err := wire.Parse(buf[:d.Len])
		if err != nil {
			t.Fatalf("endpoint sent an invalid packet: %v", err)
		}
		out = append(out, p)
	}
}

func connectPkt(src uint32, service uint32, cookie []byte) []byte {
	h := wire.ConnHeader{Opcode: wire.OpConnect, SrcConn: src, InitialPSN: 1000, Service: service,
		RecvWindow: 1024, MaxPayload: 1384, MsgWindow: 256, Paths: 4, Timestamp: 5}
	copy(h.Cookie[:], cookie)
	return wire.AppendConn(nil, &h)
}

// TestConnectFloodHoldsNoState (§7.4): CONNECTs without a valid cookie are
// answered with a CHALLENGE and create nothing, however many arrive.
func TestConnectFloodHoldsNoState(t *testing.T) {
	e := listener(t)
	for i := 0; i < 5000; i++ {
		from := netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)})
		e.Receive(transport.Time(i), from, false, connectPkt(uint32(i+1), 9, nil))
		// a forged cookie is no better than none
		e.Receive(transport.Time(i), from, false, connectPkt(uint32(i+1), 9, []byte("0123456789abcdef")))
		drain(t, e, transport.Time(i))
	}
	if e.Conns() != 0 {
		t.Fatalf("%d connections from cookieless CONNECTs", e.Conns())
	}
	if e.Stats().ChallengesSent == 0 {
		t.Fatal("no challenges sent")
	}
}

// TestHandshakeCookie (§7.3): the cookie from a CHALLENGE opens exactly one
// connection; it is bound to the address it was issued to; a repeated
// CONNECT re-sends ACCEPT without a second connection; it expires. Each
// ACCEPT is followed by the PROBE that times the acceptor's first round
// trip (§8.4).
func TestHandshakeCookie(t *testing.T) {
	e := listener(t)
	e.Receive(0, addrC, false, connectPkt(77, 9, nil))
	out := drain(t, e, 0)
	if len(out) != 1 || out[0].Prefix().Opcode() != wire.OpChallenge || out[0].Prefix().DstConn() != 77 {
		t.Fatalf("want one CHALLENGE to conn 77, got %v", out)
	}
	cookie := append([]byte(nil), out[0].Conn().Cookie()...)

	other := netip.MustParseAddr("10.9.9.9")
	e.Receive(1, other, false, connectPkt(77, 9, cookie))
	if drain(t, e, 1); e.Conns() != 0 {
		t.Fatal("a cookie issued to another address was accepted")
	}
	for i := 0; i < 3; i++ {
		e.Receive(2, addrC, false, connectPkt(77, 9, cookie))
		out = drain(t, e, 2)
		if len(out) != 2 || out[0].Prefix().Opcode() != wire.OpAccept {
			t.Fatalf("CONNECT %d with cookie: want ACCEPT and PROBE, got %v", i, out)
		}
		if pr := out[1].Prefix(); pr.Opcode() != wire.OpProbe || pr.DstConn() != 77 {
			t.Fatalf("CONNECT %d: after the ACCEPT want a PROBE to conn 77, got %v", i, out[1])
		}
		if out[0].Conn().DstConn() != 77 || out[0].Conn().SrcConn() == 0 {
			t.Fatalf("ACCEPT ids dst %d src %d", out[0].Conn().DstConn(), out[0].Conn().SrcConn())
		}
	}
	if e.Conns() != 1 {
		t.Fatalf("%d connections, want 1", e.Conns())
	}
	late := transport.Time(11 * time.Second)
	e.Receive(late, addrC, false, connectPkt(78, 9, cookie))
	if out = drain(t, e, late); len(out) != 1 || out[0].Prefix().Opcode() != wire.OpChallenge {
		t.Fatalf("expired cookie: want a fresh CHALLENGE, got %v", out)
	}
}

// TestRejectUnknownService (§7.5).
func TestRejectUnknownService(t *testing.T) {
	p := newPair(t, transport.Config{}, sim.DefaultLink, 16)
	if _, err := p.a.EP.Connect(0, p.b.Addr, 12345, transport.NewMemoryTable()); err != nil {
		t.Fatal(err)
	}
	p.a.Kick()
	p.runUntil(time.Second, func() bool { return len(p.cqA) > 0 })
	if count(p.cqA, transport.OpClosed, transport.StatusRejected) != 1 {
		t.Fatalf("want a rejected close, got %+v", p.cqA)
	}
	if p.b.EP.Conns() != 0 {
		t.Error("listener kept state for a rejected connect")
	}
}

// TestConnectTimeout: no peer at all; Connect gives up after its retries.
func TestConnectTimeout(t *testing.T) {
	link := sim.DefaultLink
	link.Drop = func(sim.Time, []byte) bool { return true }
	p := newPair(t, transport.Config{ConnectRetries: 3}, link, 16)
	c, _ := p.a.EP.Connect(0, p.b.Addr, 1, transport.NewMemoryTable())
	p.a.Kick()
	p.runUntil(time.Second, func() bool { return len(p.cqA) > 0 })
	if count(p.cqA, transport.OpClosed, transport.StatusRetryExceeded) != 1 || c.Err == nil {
		t.Fatalf("completions %+v err %v", p.cqA, c.Err)
	}
	if got := p.ab.Stats.Packets; got != 4 {
		t.Errorf("%d CONNECTs sent, want 1 + 3 retries", got)
	}
}

// TestUnknownConnGetsReset (§7.6): data for a connection id nobody has is
// counted, answered with a RESET naming that id, and the rate limit holds.
func TestUnknownConnGetsReset(t *testing.T) {
	e := listener(t)
	h := wire.DataHeader{Opcode: wire.OpWrite, DstConn: 4242, PSN: 1, MsgLen: 4, RKey: 1}
	pkt := wire.AppendData(nil, &h, []byte{1, 2, 3, 4})
	for i := 0; i < 1000; i++ {
		e.Receive(0, addrC, false, pkt)
	}
	out := drain(t, e, 0)
	if e.Stats().RxUnknownConn != 1000 {
		t.Errorf("unknown-conn drops %d, want 1000", e.Stats().RxUnknownConn)
	}
	if want := transport.Defaults.ResetRate / 2; len(out) != want {
		t.Errorf("%d RESETs to one address in one millisecond, want the half of the rate limit one address may take, %d", len(out), want)
	}
	if len(out) > 0 && (out[0].Prefix().Opcode() != wire.OpReset || out[0].Conn().SrcConn() != 4242) {
		t.Errorf("reply %v, want RESET naming 4242", out[0].Prefix().Opcode())
	}
}

// TestReplyRateFair (§7.8): stateless replies are limited in all and per
// source address. Packets from 1,000 addresses in one millisecond draw
// ResetRate replies; a host flooding CONNECTs takes only its share, and
// every other host's CONNECT in the same millisecond still draws its
// CHALLENGE (a flood used to fail 2 of 20 honest connects).
func TestReplyRateFair(t *testing.T) {
	e := listener(t)
	h := wire.DataHeader{Opcode: wire.OpWrite, DstConn: 4242, PSN: 1, MsgLen: 4, RKey: 1}
	pkt := wire.AppendData(nil, &h, []byte{1, 2, 3, 4})
	for i := range 1000 {
		e.Receive(0, netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)}), false, pkt)
	}
	if out := drain(t, e, 0); len(out) != transport.Defaults.ResetRate {
		t.Errorf("%d RESETs to 1000 addresses in one millisecond, want the rate limit %d", len(out), transport.Defaults.ResetRate)
	}

	// A host floods CONNECTs at 2 per microsecond (one every 500 ns,
	// 2,000 in all) for 1 ms; 20 other hosts connect meanwhile; the
	// endpoint's replies are sent as they are owed.
	e = listener(t)
	flood := netip.MustParseAddr("10.9.0.66")
	challenged := map[netip.Addr]int{}
	buf := make([]byte, e.MaxPacket())
	honest := 0
	for i := range 2000 {
		now := transport.Time(i) * 500
		e.Receive(now, flood, false, connectPkt(uint32(1+i), 9, nil))
		if i%100 == 50 {
			e.Receive(now, netip.AddrFrom4([4]byte{10, 9, 1, byte(i / 100)}), false, connectPkt(uint32(100000+i), 9, nil))
			honest++
		}
		for {
			d, ok := e.Transmit(now, buf)
			if !ok {
				break
			}
			if p, err := wire.Parse(buf[:d.Len]); err == nil && p.Prefix().Opcode() == wire.OpChallenge {
				challenged[d.Dst]++
			}
		}
	}
	answered := len(challenged)
	if challenged[flood] > 0 {
		answered--
	}
	if answered != honest {
		t.Errorf("%d of %d honest CONNECTs challenged during a flood from one host", answered, honest)
	}
	if half := transport.Defaults.ResetRate / 2; challenged[flood] > half {
		t.Errorf("the flooding host drew %d CHALLENGEs in 1 ms, want at most half the limit, %d", challenged[flood], half)
	}
}

// TestStaleConnectionIsReset (§7.6): when one side forgets a connection
// it did not report, the other side's next packet draws a RESET proven by
// the forgotten id's reset token, and its connection fails with
// StatusReset.
func TestStaleConnectionIsReset(t *testing.T) {
	p := newPair(t, transport.Config{}, sim.DefaultLink, 1<<16)
	p.connect()
	transport.Forget(p.cb)
	p.ca.PostWrite(&transport.WorkRequest{WRID: 1, Local: make([]byte, 3000), RemoteAddr: regionAddr, RKey: p.key})
	p.kick()
	p.runUntil(time.Second, func() bool { return count(p.cqA, transport.OpClosed, transport.StatusReset) == 1 })
	if count(p.cqA, transport.OpClosed, transport.StatusReset) != 1 || count(p.cqA, transport.OpWrite, transport.StatusReset) != 1 {
		t.Fatalf("completions %+v", p.cqA)
	}
}

// TestRestartedPeerResetIgnored (§7.6, "After a restart"): a restarted
// endpoint has a new secret, so its RESETs for connections of its former
// life carry tokens the peer refuses (counted); the peer fails the
// connection on its retry limit instead.
func TestRestartedPeerResetIgnored(t *testing.T) {
	p := newPair(t, transport.Config{}, sim.DefaultLink, 1<<16)
	p.connect()
	fresh, err := transport.NewEndpoint(transport.Config{Seed: 99}, p.b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p.b.EP = fresh
	p.ca.PostWrite(&transport.WorkRequest{WRID: 1, Local: make([]byte, 3000), RemoteAddr: regionAddr, RKey: p.key})
	p.kick()
	p.runUntil(10*time.Second, func() bool { return len(p.cqA) > 0 && p.ca.State() == transport.StateFailed })
	if count(p.cqA, transport.OpClosed, transport.StatusRetryExceeded) != 1 || count(p.cqA, transport.OpClosed, transport.StatusReset) != 0 {
		t.Fatalf("completions %+v, want the retry limit to end it", p.cqA)
	}
	if n := p.a.EP.Stats().RxResetBadToken; n == 0 || fresh.Stats().ResetsSent == 0 {
		t.Fatalf("the restarted peer sent %d RESETs, %d refused: want some of each", fresh.Stats().ResetsSent, n)
	}
}

// TestForgedResetIgnored (finding 8 of issue 22): a third party that knows
// both connection ids and can send from the peer's address, but not the
// reset token, cannot end the connection; with the token (as the peer
// would send it) the RESET works.
func TestForgedResetIgnored(t *testing.T) {
	p := newPair(t, transport.Config{}, sim.DefaultLink, 1<<16)
	p.connect()
	forged := wire.ConnHeader{Opcode: wire.OpReset, SrcConn: p.cb.LocalID(), Reason: wire.ReasonUnknownConn}
	for i := range 1000 {
		forged.DstConn = [2]uint32{0, p.ca.LocalID()}[i%2]
		forged.ResetToken[0], forged.ResetToken[1] = byte(i), byte(i>>8)
		p.a.EP.Receive(transport.Time(p.net.Now()), p.b.Addr, false, wire.AppendConn(nil, &forged))
	}
	if p.ca.State() != transport.StateEstablished || p.a.EP.Stats().RxResetBadToken != 1000 {
		t.Fatalf("after 1000 forged RESETs: state %v, %d counted", p.ca.State(), p.a.EP.Stats().RxResetBadToken)
	}
	p.writesInTurn(3, pattern(2000, 1)) // still carries data
	transport.Forget(p.cb)              // now B forgets it for real
	p.ca.PostWrite(&transport.WorkRequest{WRID: 9, Local: make([]byte, 100), RemoteAddr: regionAddr, RKey: p.key})
	p.kick()
	p.runUntil(time.Second, func() bool { return p.ca.State() == transport.StateFailed })
	if count(p.cqA, transport.OpClosed, transport.StatusReset) != 1 {
		t.Fatalf("B's own RESET did not end it: %+v", p.cqA)
	}
}

// scanReply classifies a listener's replies to one CONNECT.
func scanReply(t *testing.T, out []wire.Packet, src, svc uint32) string {
	t.Helper()
	if len(out) != 1 || out[0].Class != wire.ClassConn || out[0].Conn().DstConn() != src {
		t.Fatalf("CONNECT of %d drew %d packets: %v", src, len(out), out)
	}
	c := out[0].Conn()
	// Everything but the ids, the cookie (different per CONNECT) and the
	// CRC that covers them.
	return c.Opcode().String() + "/" + strconv.Itoa(int(c.Reason())) + "/" + strconv.Itoa(len(out[0].Bytes())) +
		"/" + svcField(c, svc) + "/" + strconv.Itoa(int(c.SrcConn())) + "/" + strconv.FormatUint(c.Token(), 16) +
		"/" + hex.EncodeToString(c.ResetToken()) + hex.EncodeToString(c.Private())
}

// svcField is the Service of a reply as a scanner compares them: a
// CHALLENGE echoes the CONNECT's (the same information whatever it is),
// a REJECT carries none.
func svcField(c wire.Conn, svc uint32) string {
	if c.Opcode() == wire.OpChallenge {
		return strconv.FormatBool(c.Service() == svc)
	}
	return strconv.Itoa(int(c.Service()))
}

// TestScanLearnsNothing (finding 7 of issue 22, §7.3): a third party
// scanning 65,536 service numbers, including one a queue pair waits on
// with a secret token and one a deferring listener serves, gets the same
// CHALLENGE for every cookieless CONNECT and, echoing the cookie, the same
// REJECT NO_SERVICE for every number whatever token it guesses: it finds
// neither service, claims neither, and no connection or request is made.
// Then the honest peer, with the token, connects to both.
func TestScanLearnsNothing(t *testing.T) {
	e, err := transport.NewEndpoint(transport.Config{Seed: 42}, addrS)
	if err != nil {
		t.Fatal(err)
	}
	const waiting, listening = 0x3a7c, 0x9e01
	const tokW, tokL = 0x1122334455667788, 0x0badcafe12345678
	e.ListenWith(waiting, transport.NewMemoryTable(), transport.ListenOptions{Token: tokW})
	e.ListenWith(listening, transport.NewMemoryTable(), transport.ListenOptions{Token: tokL, Defer: true})
	scanner := netip.MustParseAddr("10.1.0.66")
	first, second := map[string]int{}, map[string]int{}
	now := transport.Time(0)
	for svc := uint32(0); svc < 1<<16; svc++ {
		src := svc + 1
		now += 80_000 // two replies each: 25 a millisecond, under the rate one address may draw (§7.8)
		e.Receive(now, scanner, false, connectPkt(src, svc, nil))
		out := drain(t, e, now)
		first[scanReply(t, out, src, svc)]++
		h := wire.ConnHeader{Opcode: wire.OpConnect, SrcConn: src, InitialPSN: 1000, Service: svc, RecvWindow: 1024,
			MaxPayload: 1384, MsgWindow: 256, Paths: 4, Timestamp: 5, Token: uint64(svc) * 0x9e3779b97f4a7c15}
		copy(h.Cookie[:], out[0].Conn().Cookie())
		e.Receive(now, scanner, false, wire.AppendConn(nil, &h))
		second[scanReply(t, drain(t, e, now), src, svc)]++
	}
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("the scan could tell numbers apart: %d kinds of first reply, %d of second", len(first), len(second))
	}
	t.Logf("65536 numbers: first replies %v; second replies %v", first, second)
	for k := range second {
		if !strings.HasPrefix(k, "REJECT/1/88/") {
			t.Fatalf("second reply %s, want REJECT NO_SERVICE", k)
		}
	}
	var cq [8]transport.Completion
	if e.Conns() != 0 || e.PollCompletions(cq[:]) != 0 {
		t.Fatalf("the scan made %d connections", e.Conns())
	}

	// The honest peer, with the tokens.
	p := newPair(t, transport.Config{}, sim.DefaultLink, 16)
	p.b.EP.ListenWith(waiting, transport.NewMemoryTable(), transport.ListenOptions{Token: tokW})
	for _, tok := range []uint64{0, tokW ^ 1} {
		c, _ := p.a.EP.ConnectWith(0, p.b.Addr, waiting, transport.NewMemoryTable(), transport.ConnectOptions{Token: tok})
		p.a.Kick()
		p.runUntil(time.Second, func() bool { return c.State() == transport.StateFailed })
		if r, _ := c.Rejection(); c.State() != transport.StateFailed || r != wire.ReasonNoService {
			t.Fatalf("token %#x: state %v, rejection %v", tok, c.State(), r)
		}
	}
	c, _ := p.a.EP.ConnectWith(0, p.b.Addr, waiting, transport.NewMemoryTable(), transport.ConnectOptions{Token: tokW})
	p.a.Kick()
	p.runUntil(time.Second, func() bool { return c.State() == transport.StateEstablished })
	if c.State() != transport.StateEstablished {
		t.Fatalf("the honest peer with the token: %v", c.State())
	}
}

// TestDeferredAcceptPrivateData (§7.3, issue 20): a deferring listener
// holds the connection Pending with the initiator's private data, answers
// nothing to its retries, and sends the application's private data in
// its ACCEPT; a rejected one gets the application's reason and private
// data in its REJECT, repeated for a retry whose REJECT was lost.
func TestDeferredAcceptPrivateData(t *testing.T) {
	p := newPair(t, transport.Config{}, sim.DefaultLink, 16)
	p.b.EP.ListenWith(5, transport.NewMemoryTable(), transport.ListenOptions{Token: 77, Defer: true})
	var reqs []*transport.Conn
	pollB := func() {
		for _, c := range p.cqB {
			if c.Op == transport.OpRequest && !slices.Contains(reqs, c.Conn) {
				reqs = append(reqs, c.Conn)
			}
		}
	}
	a1, _ := p.a.EP.ConnectWith(0, p.b.Addr, 5, transport.NewMemoryTable(), transport.ConnectOptions{Token: 77, Private: []byte("hello from a1")})
	a2, _ := p.a.EP.ConnectWith(0, p.b.Addr, 5, transport.NewMemoryTable(), transport.ConnectOptions{Token: 77, Private: []byte("a2")})
	a1.ConnectUntil(transport.Time(5 * time.Second))
	p.a.Kick()
	p.runUntil(50*time.Millisecond, func() bool { pollB(); return false }) // several CONNECT retries
	if len(reqs) != 2 || reqs[0].State() != transport.StatePending || a1.State() != transport.StateConnecting {
		t.Fatalf("requests %d, a1 %v", len(reqs), a1.State())
	}
	got := map[string]*transport.Conn{}
	for _, r := range reqs {
		got[string(r.PeerPrivate())] = r
	}
	r1, r2 := got["hello from a1"], got["a2"]
	if r1 == nil || r2 == nil {
		t.Fatalf("private data of the requests: %q", slices.Collect(maps.Keys(got)))
	}
	if err := r1.Accept(transport.Time(p.net.Now()), []byte("welcome")); err != nil {
		t.Fatal(err)
	}
	if err := r2.Reject(transport.Time(p.net.Now()), wire.ReasonApplication, 503, []byte("busy")); err != nil {
		t.Fatal(err)
	}
	p.kick()
	p.runUntil(time.Second, func() bool { return a1.State() == transport.StateEstablished && a2.State() == transport.StateFailed })
	if string(a1.PeerPrivate()) != "welcome" || a1.State() != transport.StateEstablished {
		t.Fatalf("a1: %v, private %q", a1.State(), a1.PeerPrivate())
	}
	if r, app := a2.Rejection(); r != wire.ReasonApplication || app != 503 || string(a2.PeerPrivate()) != "busy" {
		t.Fatalf("a2: rejection %v/%d private %q (%v)", r, app, a2.PeerPrivate(), a2.Err)
	}
	if p.b.EP.Stats().ConnRequests != 2 {
		t.Fatalf("%d requests, want 2 (the rejected one's retries made none)", p.b.EP.Stats().ConnRequests)
	}
}

// TestCloseBothSides (§7.7): Close flushes what is outstanding and both
// ends report OpClosed and forget the connection.
func TestCloseBothSides(t *testing.T) {
	p := newPair(t, transport.Config{}, sim.DefaultLink, 1<<16)
	p.connect()
	p.cb.PostRecv(1, make([]byte, 100))
	p.ca.Close(p.net.Now())
	p.kick()
	p.runUntil(time.Second, func() bool {
		return count(p.cqA, transport.OpClosed, transport.StatusFlushed) == 1 && count(p.cqB, transport.OpClosed, transport.StatusFlushed) == 1
	})
	if count(p.cqB, transport.OpRecv, transport.StatusFlushed) != 1 {
		t.Errorf("posted receive not flushed: %+v", p.cqB)
	}
	if p.a.EP.Conns() != 0 || p.b.EP.Conns() != 0 {
		t.Errorf("connections left: A %d B %d", p.a.EP.Conns(), p.b.EP.Conns())
	}
}

// TestDisconnectCompletesDelivered (§7.7): a message the closing end had
// received completes as delivered at its sender although every ack for
// it was lost, because the DISCONNECT carries what arrived
// (ReceivedPSN); a message that never arrived is flushed. Before, both
// were flushed: a reply SEND the peer had read came back "flushed" when
// the peer closed right after reading it (libmetaroce's test, 1% loss).
func TestDisconnectCompletesDelivered(t *testing.T) {
	p := newPair(t, transport.Config{}, sim.DefaultLink, 1<<16)
	p.connect()
	p.ba.SetLink(sim.LinkConfig{RateBps: sim.DefaultLink.RateBps, Delay: sim.DefaultLink.Delay,
		Drop: func(_ sim.Time, pkt []byte) bool {
			q, err := wire.Parse(pkt)
			return err == nil && q.Class == wire.ClassAck
		}})
	p.ab.SetLink(sim.LinkConfig{RateBps: sim.DefaultLink.RateBps, Delay: sim.DefaultLink.Delay,
		Drop: dropIf(func(_ sim.Time, d wire.Data) bool { return d.Opcode() == wire.OpWrite })})
	if err := p.cb.PostRecv(7, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := p.ca.PostSend(&transport.WorkRequest{WRID: 1, Local: []byte("reply")}); err != nil {
		t.Fatal(err)
	}
	if err := p.ca.PostWrite(&transport.WorkRequest{WRID: 2, Stream: 1, Local: pattern(64, 1), RemoteAddr: regionAddr, RKey: p.key}); err != nil {
		t.Fatal(err)
	}
	p.kick()
	p.runUntil(time.Second, func() bool { return count(p.cqB, transport.OpRecv, transport.StatusOK) == 1 })
	if count(p.cqB, transport.OpRecv, transport.StatusOK) != 1 || len(p.cqA) != 1 {
		t.Fatalf("B's receive did not complete alone: A %+v B %+v", p.cqA, p.cqB)
	}
	p.cb.Close(p.net.Now())
	p.kick()
	p.runUntil(time.Second, func() bool { return count(p.cqA, transport.OpClosed, transport.StatusFlushed) == 1 })
	var send, write transport.Status = 255, 255
	for _, c := range p.cqA {
		switch {
		case c.Op == transport.OpSend && c.WRID == 1:
			send = c.Status
		case c.Op == transport.OpWrite && c.WRID == 2:
			write = c.Status
		}
	}
	if send != transport.StatusOK || write != transport.StatusFlushed {
		t.Fatalf("after B closed: the SEND B had received %v, the WRITE it never got %v; want ok, flushed (%+v)", send, write, p.cqA)
	}
}

// TestMalformedCounted (§3.5): truncated, corrupted, wrong-version and
// unknown-opcode packets on a live connection are counted by reason and
// change nothing; a wrong version from the real peer draws NACK
// UNSUPPORTED_VERSION.
func TestMalformedCounted(t *testing.T) {
	p := newPair(t, transport.Config{}, sim.DefaultLink, 1<<16)
	p.connect()
	h := wire.DataHeader{Opcode: wire.OpWrite, DstConn: p.cb.LocalID(), PSN: 1, MsgLen: 4, RKey: p.key, RemoteAddr: regionAddr}
	good := wire.AppendData(nil, &h, []byte{9, 9, 9, 9})
	now := p.net.Now()
	short := good[:20]
	badCRC := append([]byte(nil), good...)
	badCRC[70-4] ^= 0x10
	badVer := append([]byte(nil), good...)
	badVer[0] = 2
	wire.Seal(badVer) // intact: a corrupted version byte must not draw the NACK
	flipped := append([]byte(nil), good...)
	flipped[0] = 3 // the CRC no longer matches: must be ignored
	badOp := append([]byte(nil), good...)
	badOp[1] = 0x7f
	wire.Seal(badOp)
	for _, b := range [][]byte{short, badCRC, flipped, badVer, badOp} {
		p.b.EP.Receive(now, p.a.Addr, false, b)
	}
	st := p.b.EP.Stats()
	for e, want := range map[wire.Error]uint64{wire.ErrShort: 1, wire.ErrCRC: 1, wire.ErrVersion: 2, wire.ErrOpcode: 1} {
		if st.RxMalformed[e.Reason()] != want {
			t.Errorf("%v counted %d times, want %d", e, st.RxMalformed[e.Reason()], want)
		}
	}
	if st.NacksSent[wire.NackUnsupportedVersion] != 1 { // for badVer only, not for flipped
		t.Errorf("no NACK UNSUPPORTED_VERSION for the peer's v2 packet")
	}
	for _, b := range p.region {
		if b != 0 {
			t.Fatal("a malformed packet was placed")
		}
	}
}

// TestClosingDoesNotSpin: a connection closed with data in flight keeps
// its data timers (path tick, ack delay, RTO) until it is gone, but
// while it closes only the teardown timer may run. When the DISCONNECT
// is lost for a while, those stale deadlines must not keep the endpoint's
// timer due (the timer loop then woke every nanosecond: three million
// wake-ups for the 3 ms the teardown takes here).
func TestClosingDoesNotSpin(t *testing.T) {
	p := newPair(t, transport.Config{}, sim.DefaultLink, 1<<20)
	p.connect()
	if err := p.ca.PostWrite(&transport.WorkRequest{Local: pattern(1<<20, 3), RemoteAddr: regionAddr, RKey: p.key}); err != nil {
		t.Fatal(err)
	}
	p.kick()
	p.idle(20 * time.Microsecond) // data in flight, its timers armed
	cut := p.net.Now() + sim.Time(3*time.Millisecond)
	p.ab.SetLink(sim.LinkConfig{RateBps: sim.DefaultLink.RateBps, Delay: sim.DefaultLink.Delay,
		Drop: func(now sim.Time, _ []byte) bool { return now < cut }})
	p.ca.Close(p.net.Now())
	p.kick()
	start := p.net.Events
	p.runUntil(time.Second, func() bool { return count(p.cqA, transport.OpClosed, transport.StatusFlushed) == 1 })
	if count(p.cqA, transport.OpClosed, transport.StatusFlushed) != 1 {
		t.Fatalf("not closed: %+v", p.cqA)
	}
	if n := p.net.Events - start; n > 10_000 {
		t.Errorf("%d events to close", n)
	}
}

// dropConn returns a link filter that drops the next n connection
// packets of opcode op (n is read and counted down as they pass).
func dropConn(op wire.Opcode, n *int) func(sim.Time, []byte) bool {
	return func(_ sim.Time, pkt []byte) bool {
		p, err := wire.Parse(pkt)
		if err != nil || p.Class != wire.ClassConn || p.Conn().Opcode() != op || *n == 0 {
			return false
		}
		*n--
		return true
	}
}

// TestHandshakeRetryFromRTT (§7.3): an endpoint that has timed a
// handshake retries CONNECT after the measured RTO (at least MinRTO)
// instead of ConnectTimeout; connections that started before its first
// sample re-arm to it when the sample comes; and those fast retries do
// not count against ConnectRetries, so an unreachable listener still
// takes the whole fixed schedule to fail.
func TestHandshakeRetryFromRTT(t *testing.T) {
	def := transport.Defaults
	t.Run("lost ACCEPT", func(t *testing.T) {
		lost := 0
		link := sim.DefaultLink
		p := newPair(t, transport.Config{}, link, 16)
		link.Drop = dropConn(wire.OpAccept, &lost)
		p.ba.SetLink(link)
		p.connect() // times the handshake
		p.ca.Close(p.net.Now())
		p.kick()
		p.idle(time.Millisecond)
		lost = 1
		p.ca = nil
		start := p.net.Now()
		if _, err := p.a.EP.Connect(start, p.b.Addr, 1, transport.NewMemoryTable()); err != nil {
			t.Fatal(err)
		}
		p.a.Kick()
		p.runUntil(time.Second, func() bool { return p.ca != nil })
		took := time.Duration(p.net.Now() - start)
		if lost != 0 || p.ca == nil {
			t.Fatalf("ACCEPT not dropped (%d left) or never connected", lost)
		}
		if took < def.MinRTO || took > 2*def.MinRTO {
			t.Errorf("connected %v after a lost ACCEPT, want one MinRTO (%v) and a round trip; ConnectTimeout is %v", took, def.MinRTO, def.ConnectTimeout)
		}
	})
	t.Run("started blind", func(t *testing.T) {
		lost := 1
		link := sim.DefaultLink
		link.Drop = dropConn(wire.OpConnect, &lost)
		p := newPair(t, transport.Config{}, link, 16)
		var at []sim.Time
		p.onA = func(now sim.Time, c transport.Completion) {
			if c.Op == transport.OpConnected {
				at = append(at, now)
			}
		}
		// Two connections at once, before any answer: the first CONNECT
		// on the wire is lost; the second connection's CHALLENGE is the
		// endpoint's first sample.
		for range 2 {
			if _, err := p.a.EP.Connect(0, p.b.Addr, 1, transport.NewMemoryTable()); err != nil {
				t.Fatal(err)
			}
		}
		p.a.Kick()
		p.runUntil(time.Second, func() bool { return len(at) == 2 })
		if lost != 0 || len(at) != 2 {
			t.Fatalf("CONNECT not dropped (%d left) or %d of 2 connected", lost, len(at))
		}
		if took := time.Duration(at[1]); took > 2*def.MinRTO {
			t.Errorf("the connection whose CONNECT was lost connected after %v, want about MinRTO (%v), not ConnectTimeout (%v)", took, def.MinRTO, def.ConnectTimeout)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		p := newPair(t, transport.Config{}, sim.DefaultLink, 16)
		p.connect()
		dead := sim.DefaultLink
		dead.Drop = func(sim.Time, []byte) bool { return true }
		p.ab.SetLink(dead)
		sent := p.ab.Stats.Packets
		start := p.net.Now()
		c, err := p.a.EP.Connect(start, p.b.Addr, 1, transport.NewMemoryTable())
		if err != nil {
			t.Fatal(err)
		}
		p.a.Kick()
		p.runUntil(10*time.Second, func() bool { return c.State() == transport.StateFailed })
		if c.State() != transport.StateFailed {
			t.Fatal("connection to an unreachable listener did not fail")
		}
		// The fixed schedule: ConnectTimeout doubling up to MaxRTO,
		// ConnectRetries retries, failing at the next expiry.
		var fixed time.Duration
		for k, rto := 0, def.ConnectTimeout; k <= def.ConnectRetries; k, rto = k+1, min(2*rto, def.MaxRTO) {
			fixed += rto
		}
		took := time.Duration(p.net.Now() - start)
		connects := p.ab.Stats.Packets - sent
		if took < fixed {
			t.Errorf("failed after %v, sooner than the fixed schedule's %v", took, fixed)
		}
		if connects <= uint64(def.ConnectRetries)+1 {
			t.Errorf("%d CONNECTs: no fast retries before the fixed schedule", connects)
		}
	})

	// ConnectUntil: the same connection keeps trying past ConnectRetries
	// until the application's deadline, reaches a listener that answers
	// late, and gives up at the first expiry past a deadline that ends
	// unanswered.
	t.Run("until-deadline", func(t *testing.T) {
		for _, answer := range []bool{true, false} {
			p := newPair(t, transport.Config{}, sim.DefaultLink, 16)
			p.connect()
			dead := sim.DefaultLink
			dead.Drop = func(sim.Time, []byte) bool { return true }
			p.ab.SetLink(dead)
			start := p.net.Now()
			c, err := p.a.EP.Connect(start, p.b.Addr, 1, transport.NewMemoryTable())
			if err != nil {
				t.Fatal(err)
			}
			until := start + sim.Time(2*time.Second)
			c.ConnectUntil(until)
			p.a.Kick()
			p.runUntil(1500*time.Millisecond, func() bool { return c.State() != transport.StateConnecting })
			if c.State() != transport.StateConnecting {
				t.Fatalf("answer %v: %v after %v, before its 2 s deadline", answer, c.State(), time.Duration(p.net.Now()-start))
			}
			if answer {
				p.ab.SetLink(sim.DefaultLink)
				p.runUntil(time.Second, func() bool { return c.State() != transport.StateConnecting })
				if c.State() != transport.StateEstablished {
					t.Fatalf("a listener answering after 1.5 s: %v", c.State())
				}
				continue
			}
			p.runUntil(time.Second, func() bool { return c.State() != transport.StateConnecting })
			took := time.Duration(p.net.Now() - start)
			if c.State() != transport.StateFailed || took < 2*time.Second || took > 2*time.Second+2*def.MaxRTO {
				t.Fatalf("unanswered until a 2 s deadline: %v after %v", c.State(), took)
			}
		}
	})
}
