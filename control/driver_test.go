package control

import (
	"testing"

	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/ring"
	"github.com/metaroce/metaroce/transport"
)

// TestStepVisitsActiveOnly: an engine pass visits the queue pairs with
// something to do, not all of them (issue 22: every pass read every send
// queue, and 4,000 idle connections tripled a ping-pong's p50). Idle ones
// go cold after hotLinger with their send queues armed; a post rings the
// doorbell and brings its queue pair back within bellEvery; the pass
// allocates nothing, however many queue pairs are cold.
func TestStepVisitsActiveOnly(t *testing.T) {
	d, err := NewEngineDriver(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const n = 2000
	ss := &session{}
	qps := make([]*qp, n)
	for i := range qps {
		q, err := newQP(uint32(i+1), ss, 8, 8, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer q.close()
		if err := d.add(q); err != nil {
			t.Fatal(err)
		}
		q.state = qpConnected
		qps[i] = q
		if i != n/2 { // that one's application attaches below
			q.handOver()
		}
	}
	now := transport.Time(1)
	step := func() uint64 {
		before := d.stats.Visits
		d.Step(nil, now)
		return d.stats.Visits - before
	}
	if v := step(); v != n {
		t.Fatalf("first pass visited %d queue pairs, want all %d (new ones are hot)", v, n)
	}
	now += hotLinger
	step()
	if d.stats.Cooled != n || len(d.hot) != 0 {
		t.Fatalf("after %v idle: %d cooled, %d hot; want %d and 0", hotLinger, d.stats.Cooled, len(d.hot), n)
	}
	for range 10 {
		now += bellEvery
		if v := step(); v != 0 {
			t.Fatalf("a pass with every queue pair idle visited %d", v)
		}
	}

	// The application of one queue pair posts (a request that does not
	// parse: the engine completes it at once, with no connection needed)
	// and rings, as client.QP.Post does when the flag is armed.
	q := qps[n/2]
	app, err := ring.Attach(dupFD(t, q.sq.FD()))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	appCQ, err := ring.Attach(dupFD(t, q.cq.ring.FD()))
	if err != nil {
		t.Fatal(err)
	}
	defer appCQ.Close()
	post := func(wrid uint64) {
		p := app.Producer()
		first, got, err := p.Reserve(1)
		if err != nil || got != 1 {
			t.Fatalf("reserve: %d, %v", got, err)
		}
		s := p.Slot(first)
		clear(s)
		w := proto.WR{Op: proto.WRWrite, WRID: wrid}
		w.Put(s)
		s[0] = 0xff // no such operation
		p.Commit(1)
		if _, err := p.Notify(q.appBell); err != nil {
			t.Fatal(err)
		}
	}
	post(1)
	now += bellEvery
	if v := step(); v != 1 {
		t.Fatalf("the pass after a post visited %d queue pairs, want the one that rang", v)
	}
	if d.stats.Rung != 1 || d.stats.BadWRs != 1 {
		t.Fatalf("rung %d, bad requests %d; want 1 and 1", d.stats.Rung, d.stats.BadWRs)
	}
	c := appCQ.Consumer()
	first, got, err := c.Peek(4)
	if err != nil || got != 1 {
		t.Fatalf("%d completions, %v; want the one for the bad request", got, err)
	}
	if e, ok := proto.ParseCQE(c.Slot(first)); !ok || e.WRID != 1 || e.Status != proto.StatusBadWR {
		t.Fatalf("completion %+v %v, want wr 1 bad_wr", e, ok)
	}
	c.Release(got)

	// While it is used it stays hot: its posts need no ring.
	wr := uint64(2)
	busy := func() {
		p := app.Producer()
		first, got, _ := p.Reserve(1)
		if got == 1 {
			s := p.Slot(first)
			s[0] = 0xff
			p.Commit(1)
		}
		now += bellEvery / 4
		d.Step(nil, now)
		if _, got, _ := c.Peek(8); got > 0 {
			c.Release(got)
		}
		wr++
	}
	before := d.stats.Visits
	busy()
	if v := d.stats.Visits - before; v != 1 {
		t.Fatalf("a busy pass visited %d queue pairs, want 1", v)
	}
	if allocs := testing.AllocsPerRun(500, busy); allocs != 0 {
		t.Errorf("%v allocations per pass with %d cold queue pairs, want 0", allocs, n-1)
	}
	if d.stats.BadWRs < 500 {
		t.Fatalf("%d requests served by the busy passes", d.stats.BadWRs)
	}
}
