package control

import (
	"testing"

	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/ring"
)

// TestSharedCQRoomAndOverflow: two queue pairs completing into one
// 4-slot CQ share its room (what one owes is room the other cannot take),
// each entry names its queue pair, a full CQ holds what does not fit in
// its backlog (the CQ's size) and counts the rest as overflows, and the
// backlog moves in, in order, as the application takes entries; a
// destroyed queue pair's debts give the room back.
func TestSharedCQRoomAndOverflow(t *testing.T) {
	bell, appBell, err := ring.NewDoorbellPair()
	if err != nil {
		t.Fatal(err)
	}
	defer appBell.Close()
	c, err := newCQ(4, bell)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.ring.Close(); bell.Close() }()
	ss := &session{}
	q1, err := newQP(11, ss, 8, 0, c)
	if err != nil {
		t.Fatal(err)
	}
	defer q1.close()
	q2, err := newQP(22, ss, 2, 0, c)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.close()
	if len(q1.tags) != 8 || len(q2.tags) != 2 || q1.budget() != 4 || q2.budget() != 2 {
		t.Fatalf("tags %d/%d, budgets %d/%d: want 8/2 tags, budgets 4 (the CQ) and 2 (its send queue)",
			len(q1.tags), len(q2.tags), q1.budget(), q2.budget())
	}
	q1.owe(3)
	if q2.budget() != 1 || q1.budget() != 1 {
		t.Fatalf("after q1 owes 3 of 4: budgets %d/%d, want 1/1", q1.budget(), q2.budget())
	}
	q1.owe(-3)

	app, err := ring.Attach(dupFD(t, c.ring.FD()))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	cons := app.Consumer()
	// 4 into the ring, 4 into the backlog, 1 overflow.
	for i := range 9 {
		q := q1
		if i%2 == 1 {
			q = q2
		}
		ok := q.complete(proto.CQE{WRID: uint64(i), Op: proto.CQRecvWriteImm})
		if ok != (i < 8) {
			t.Fatalf("entry %d: put %v", i, ok)
		}
	}
	if len(c.pending) != 4 || c.overflow != 1 || c.room() != 0 {
		t.Fatalf("backlog %d, overflows %d, room %d: want 4, 1, 0", len(c.pending), c.overflow, c.room())
	}
	var got []proto.CQE
	for len(got) < 8 {
		c.flush()
		first, n, err := cons.Peek(4)
		if err != nil || n == 0 {
			t.Fatalf("peek: %d %v after %d entries", n, err, len(got))
		}
		for i := range n {
			e, ok := proto.ParseCQE(cons.Slot(first + i))
			if !ok {
				t.Fatal("malformed entry")
			}
			got = append(got, e)
		}
		cons.Release(n)
	}
	for i, e := range got {
		want := uint32(11)
		if i%2 == 1 {
			want = 22
		}
		if e.WRID != uint64(i) || e.QPN != want {
			t.Fatalf("entry %d: wr %d of queue pair %d, want wr %d of %d", i, e.WRID, e.QPN, i, want)
		}
	}
	// A queue pair going with requests outstanding gives their room back.
	q2.owe(2)
	if q1.budget() != 2 {
		t.Fatalf("q1's budget %d with q2 owing 2, want 2", q1.budget())
	}
	q2.owe(-q2.outstanding) // as detach does
	if q1.budget() != 4 || c.outstanding != 0 {
		t.Fatalf("after q2 went: q1's budget %d, CQ owed %d", q1.budget(), c.outstanding)
	}
}
