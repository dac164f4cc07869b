package control_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/internal/apptest"
)

// waitCQ takes one entry of a shared CQ, failing the test after 10 s.
func waitCQ(t *testing.T, cq *client.CQ) client.Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var c [1]client.Completion
	if _, err := cq.Wait(ctx, c[:]); err != nil {
		t.Fatal(err)
	}
	return c[0]
}

// TestSharedCQ: eight queue pairs of one session complete into one CQ;
// each entry names its queue pair (QPN), connection events included; the
// CQ's Wait sleeps in the netpoller on its descriptor and wakes for a
// completion; the CQ cannot be destroyed while a queue pair uses it, and
// can once they are gone.
func TestSharedCQ(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	cq, err := cb.CreateCQ(client.CQOptions{Slots: 64, Spin: -1})
	if err != nil {
		t.Fatal(err)
	}
	if cq.FD() < 0 || cq.Slots != 64 {
		t.Fatalf("cq fd %d, %d slots", cq.FD(), cq.Slots)
	}
	if _, err := cb.CreateQP(client.QPOptions{CQ: cq, CQSlots: 8}); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("a shared-CQ queue pair with cq_slots of its own: %v", err)
	}
	const n = 8
	src := apptest.Region(t, ca, 64*n, 0)
	dst := apptest.Region(t, cb, 64*n, client.LocalWrite)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	qas := make([]*client.QP, n)
	qbs := make([]*client.QP, n)
	byQPN := map[uint32]int{}
	for i := range n {
		if qbs[i], err = cb.CreateQP(client.QPOptions{CQ: cq, SQSlots: 8}); err != nil {
			t.Fatal(err)
		}
		if _, err := qbs[i].PollCQ(make([]client.Completion, 1)); !errors.Is(err, client.ErrSharedCQ) {
			t.Fatalf("PollCQ on a shared-CQ queue pair: %v", err)
		}
		byQPN[qbs[i].Num] = i
		if err := qbs[i].PostRecv(uint64(100+i), dst, 64*i, 64); err != nil {
			t.Fatal(err)
		}
		if qas[i], err = ca.CreateQP(client.QPOptions{}); err != nil {
			t.Fatal(err)
		}
		acc := make(chan error, 1)
		go func() { _, err := qbs[i].Accept(ctx); acc <- err }()
		if err := qas[i].Connect(ctx, hb.Addr, qbs[i].Num, qbs[i].Token); err != nil {
			t.Fatal(err)
		}
		if err := <-acc; err != nil {
			t.Fatal(err)
		}
	}
	if err := cq.Destroy(); !errors.Is(err, client.ErrBusy) {
		t.Fatalf("destroying a CQ in use: %v", err)
	}
	// Every queue pair's EventConnected comes through the CQ, named.
	connected := map[uint32]bool{}
	for len(connected) < n {
		c := waitCQ(t, cq)
		if c.Op != client.CompEvent || c.Event != client.EventConnected {
			t.Fatalf("want connected events first, got %+v", c)
		}
		if _, ok := byQPN[c.QPN]; !ok || connected[c.QPN] {
			t.Fatalf("event for queue pair %d: not one of ours, or twice", c.QPN)
		}
		connected[c.QPN] = true
	}
	// With the CQ drained and the engine idle, Wait sleeps; each SEND
	// wakes it through the descriptor.
	for i := range n {
		fill(src.Bytes()[64*i:64*(i+1)], uint64(i))
		time.Sleep(2 * time.Millisecond)
		if err := qas[i].PostSend(uint64(i), src, 64*i, 64); err != nil {
			t.Fatal(err)
		}
		c := waitCQ(t, cq)
		if c.Op != client.CompRecv || c.Err() != nil || c.WRID != uint64(100+i) || c.QPN != qbs[i].Num || c.Bytes != 64 {
			t.Fatalf("receive %d: %+v (%v), want queue pair %d", i, c, c.Err(), qbs[i].Num)
		}
		same(t, "receive", dst.Bytes()[64*i:64*(i+1)], src.Bytes()[64*i:64*(i+1)])
		if w := wait(t, qas[i]); w.Err() != nil {
			t.Fatal(w.Err())
		}
	}
	// A peer's close comes as that queue pair's event.
	if err := qas[3].Destroy(); err != nil {
		t.Fatal(err)
	}
	if c := waitCQ(t, cq); c.Op != client.CompEvent || c.Event != client.EventPeerClosed || c.QPN != qbs[3].Num {
		t.Fatalf("after the peer's close: %+v, want peer closed for %d", c, qbs[3].Num)
	}
	for _, q := range qbs {
		if err := q.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cq.Destroy(); err != nil {
		t.Fatalf("destroying a CQ no queue pair uses: %v", err)
	}
}

// TestScatterGatherWrite: a WRITE with a 4-entry list over two regions
// and a SEND with a 3-entry list land byte-exact; a READ scatters back
// into a 4-entry list.
func TestScatterGatherWrite(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	if ca.MaxSGE != proto.MaxSGE || proto.MaxSGE != 4 {
		t.Fatalf("the daemon allows %d entries, want %d", ca.MaxSGE, proto.MaxSGE)
	}
	r1 := apptest.Region(t, ca, 20000, client.LocalWrite)
	r2 := apptest.Region(t, ca, 4096, client.LocalWrite)
	dst := apptest.Region(t, cb, 32768, client.RemoteWrite|client.RemoteRead|client.LocalWrite)
	fill(r1.Bytes(), 1)
	fill(r2.Bytes(), 2)
	qa, qb := pair(t, ca, cb, hb.Addr)
	sgl := []client.SGE{{MR: r1, Off: 3, Length: 9000}, {MR: r2, Off: 100, Length: 17}, {MR: r1, Off: 12000, Length: 8000}, {MR: r2, Off: 0, Length: 1}}
	var want []byte
	for _, e := range sgl {
		want = append(want, e.MR.Bytes()[e.Off:e.Off+e.Length]...)
	}
	if _, err := qa.Post(client.WR{Op: client.OpWrite, WRID: 1, SGL: sgl, RemoteAddr: dst.Addr + 5, RemoteKey: dst.Key}); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qa); c.Err() != nil || c.WRID != 1 || c.Op != client.CompWrite {
		t.Fatalf("write: %+v %v", c, c.Err())
	}
	same(t, "WRITE from a 4-entry list", dst.Bytes()[5:5+len(want)], want)

	// SEND from a list into one receive buffer.
	if err := qb.PostRecv(7, dst, 20000, 12000); err != nil {
		t.Fatal(err)
	}
	sgl3 := sgl[1:]
	want3 := want[9000:]
	if _, err := qa.Post(client.WR{Op: client.OpSend, WRID: 2, SGL: sgl3}); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qa); c.Err() != nil || c.WRID != 2 {
		t.Fatalf("send: %+v %v", c, c.Err())
	}
	if c := wait(t, qb); c.Err() != nil || c.Op != client.CompRecv || c.Bytes != len(want3) {
		t.Fatalf("receive: %+v %v", c, c.Err())
	}
	same(t, "SEND from a 3-entry list", dst.Bytes()[20000:20000+len(want3)], want3)

	// READ back into a list: each entry gets its piece.
	clear(r1.Bytes())
	clear(r2.Bytes())
	back := []client.SGE{{MR: r2, Off: 0, Length: 4000}, {MR: r1, Off: 0, Length: 10000}, {MR: r2, Off: 4000, Length: 96}, {MR: r1, Off: 15000, Length: len(want) - 14096}}
	if _, err := qa.Post(client.WR{Op: client.OpRead, WRID: 3, SGL: back, RemoteAddr: dst.Addr + 5, RemoteKey: dst.Key}); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qa); c.Err() != nil || c.WRID != 3 || c.Op != client.CompRead {
		t.Fatalf("read: %+v %v", c, c.Err())
	}
	var got []byte
	for _, e := range back {
		got = append(got, e.MR.Bytes()[e.Off:e.Off+e.Length]...)
	}
	same(t, "READ into a 4-entry list", got, want)
}

// TestHostileSharedCQAndSGL: a session naming another's CQ finds none; an
// entry under a key the session does not have, or past its region, fails
// its request with local_protection, a list of more entries than the
// daemon allows (raw slots, as the library refuses to make one) or whose
// lengths do not add up fails with bad_wr, the library refuses too long a
// list itself; and the daemon serves on, byte-exact.
func TestHostileSharedCQAndSGL(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	victim, evil, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	vcq, err := victim.CreateCQ(client.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evil.CreateQP(client.QPOptions{CQ: vcq}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a queue pair on another session's CQ: %v, want not found", err)
	}
	raw := dialRaw(t, ha.Sock)
	raw.seq++
	if err := raw.c.Send(proto.Request{Header: proto.Header{V: proto.Version, Seq: raw.seq, Op: proto.OpDestroyCQ}, CQ: vcq.Num}); err != nil {
		t.Fatal(err)
	}
	msg, _, err := raw.c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var resp proto.Response
	if h, _ := proto.Decode(msg, &resp); h.Code != proto.CodeNotFound {
		t.Fatalf("destroying another session's CQ: %s %s", h.Code, h.Error)
	}

	mr := apptest.Region(t, evil, 4096, client.LocalWrite)
	dst := apptest.Region(t, cb, 4096, client.RemoteWrite)
	qe, _ := pair(t, evil, cb, hb.Addr)
	wrongKey := &client.MR{Addr: mr.Addr, Len: mr.Len, Key: mr.Key ^ 0x5a5a}
	tooLong := &client.MR{Addr: mr.Addr, Len: 1 << 30, Key: mr.Key}
	for name, sgl := range map[string][]client.SGE{
		"wrong key":    {{MR: mr, Length: 8}, {MR: wrongKey, Off: 8, Length: 8}},
		"out of range": {{MR: mr, Length: 8}, {MR: tooLong, Off: 4090, Length: 100}},
	} {
		if _, err := qe.Post(client.WR{Op: client.OpWrite, WRID: 9, SGL: sgl, RemoteAddr: dst.Addr, RemoteKey: dst.Key}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c := wait(t, qe); !errors.Is(c.Err(), client.ErrLocalProtection) {
			t.Fatalf("%s: %+v %v, want local protection", name, c, c.Err())
		}
	}
	five := make([]client.SGE, 5)
	for i := range five {
		five[i] = client.SGE{MR: mr, Off: i, Length: 1}
	}
	if _, err := qe.Post(client.WR{Op: client.OpWrite, SGL: five, RemoteAddr: dst.Addr, RemoteKey: dst.Key}); !errors.Is(err, client.ErrSGL) {
		t.Fatalf("five entries: %v, want ErrSGL", err)
	}

	// Raw slots: five entries, and lengths that do not add up.
	a := newAttacker(t, ha, hb)
	for i, w := range []proto.WR{
		{Op: proto.WRWrite, Flags: proto.WRSGL, WRID: 1, Length: 5, NSGE: 5},
		{Op: proto.WRWrite, Flags: proto.WRSGL, WRID: 2, Length: 99, NSGE: 2, SGL: [proto.MaxSGE]proto.SGE{{Addr: 1, Length: 1, LKey: 1}, {Addr: 2, Length: 1, LKey: 1}}},
	} {
		p := a.sq.Producer()
		first, got, err := p.Reserve(2)
		if err != nil || got != 2 {
			t.Fatalf("reserve: %d %v", got, err)
		}
		w.Put(p.Slot(first))
		w.NSGE = min(w.NSGE, proto.MaxSGE)
		w.PutSGL(p.Slot(first + 1))
		p.Slot(first)[44] = byte(map[int]int{0: 5, 1: 2}[i])
		p.Commit(2)
		ringBell(a)
		e := takeCQE(t, a)
		if e.WRID != w.WRID || e.Status != proto.StatusBadWR || e.QPN != a.qpn {
			t.Fatalf("raw list %d: %+v, want bad_wr for queue pair %d", i, e, a.qpn)
		}
	}

	// The daemon serves on.
	qv, _ := pair(t, victim, cb, hb.Addr)
	src := apptest.Region(t, victim, 4096, 0)
	fill(src.Bytes(), 77)
	if err := qv.PostWrite(1, src, 0, 4096, dst.Addr, dst.Key); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qv); c.Err() != nil {
		t.Fatal(c.Err())
	}
	same(t, "victim's write", dst.Bytes(), src.Bytes())
}

// ringBell rings the engine for the attacker's send queue.
func ringBell(a *attacker) { unix.Sendto(a.bell, []byte{1}, unix.MSG_DONTWAIT, nil) }

// takeCQE waits (10 s at most) for the attacker's next completion.
func takeCQE(t *testing.T, a *attacker) proto.CQE {
	t.Helper()
	c := a.cq.Consumer()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if first, got, err := c.Peek(1); err == nil && got == 1 {
			e, ok := proto.ParseCQE(c.Slot(first))
			c.Release(1)
			if !ok {
				t.Fatal("malformed completion")
			}
			if e.Op == proto.CQEvent {
				continue
			}
			return e
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no completion in 10 s")
	return proto.CQE{}
}
