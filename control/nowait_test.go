package control_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/internal/apptest"
	"github.com/metaroce/metaroce/transport"
)

// startedAtOnce fails the test if a nowait connect took long enough to
// have waited for its peer.
func startedAtOnce(t *testing.T, took time.Duration) {
	t.Helper()
	if took > 300*time.Millisecond {
		t.Fatalf("a nowait connect answered after %v: it waited", took)
	}
}

// TestConnectNoWaitListener: a nowait connect to a listener answers at
// once, with the queue pair connecting and no event yet; the listener's
// application takes the request a second later (past the transport's own
// CONNECT schedule of about 0.6 s: the deadline carries it) and accepts
// it; the queue pair then reports EventConnected, and a SEND posted
// afterwards lands byte-exact.
func TestConnectNoWaitListener(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	l, err := cb.Listen(client.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := apptest.Region(t, ca, 4096, 0)
	dst := apptest.Region(t, cb, 4096, client.LocalWrite)
	qa, err := ca.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := qa.StartConnect(hb.Addr, l.Service, client.ConnectOptions{Token: l.Token, Private: []byte("hi")}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	startedAtOnce(t, time.Since(start))
	if a := query(t, qa); a.State != client.QPConnecting {
		t.Fatalf("after a nowait connect: %+v, want connecting", a)
	}
	time.Sleep(time.Second)
	if e, ok := qa.PollEvent(); ok {
		t.Fatalf("event %+v before the listener accepted", e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := l.GetRequest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Peer != ha.Addr || string(r.Private) != "hi" {
		t.Fatalf("request from %v with private data %q", r.Peer, r.Private)
	}
	qb, err := cb.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := qb.PostRecv(7, dst, 0, 4096); err != nil {
		t.Fatal(err)
	}
	if err := r.Accept(qb, nil); err != nil {
		t.Fatal(err)
	}
	if e := waitEvent(t, qa); e.Type != client.EventConnected || e.Err() != nil {
		t.Fatalf("event %+v, want connected", e)
	}
	if qa.State() != client.QPConnected {
		t.Fatalf("state %v after the connected event", qa.State())
	}
	fill(src.Bytes(), 1)
	if err := qa.PostSend(1, src, 0, 4096); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qb); c.Err() != nil || c.Op != client.CompRecv || c.WRID != 7 || c.Bytes != 4096 {
		t.Fatalf("receive %+v (%v)", c, c.Err())
	}
	same(t, "received", dst.Bytes(), src.Bytes())
	if c := wait(t, qa); c.Err() != nil || c.Op != client.CompSend || c.WRID != 1 {
		t.Fatalf("send %+v (%v)", c, c.Err())
	}
}

// TestConnectNoWaitSimultaneous: two sessions, each with a listener, each
// connect to the other's listener first and only then take and accept
// the request that came in (the simultaneous open of two libfabric
// endpoints that send to each other first). A waiting connect deadlocks
// here, each side in its connect until the other's accept, which cannot
// come; with nowait all four queue pairs connect, and a SEND each way
// lands byte-exact.
func TestConnectNoWaitSimultaneous(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	type side struct {
		h       *apptest.Host
		l       *client.Listener
		out, in *client.QP
		mr      *client.MR
	}
	var sides [2]*side
	for i, h := range []*apptest.Host{ha, hb} {
		c := apptest.Dial(t, h.Sock)
		s := &side{h: h, mr: apptest.Region(t, c, 8192, client.LocalWrite)}
		var err error
		if s.l, err = c.Listen(client.ListenOptions{Public: true}); err != nil {
			t.Fatal(err)
		}
		if s.out, err = c.CreateQP(client.QPOptions{}); err != nil {
			t.Fatal(err)
		}
		if s.in, err = c.CreateQP(client.QPOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := s.in.PostRecv(9, s.mr, 4096, 4096); err != nil {
			t.Fatal(err)
		}
		fill(s.mr.Bytes()[:4096], uint64(10+i))
		sides[i] = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	gate := make(chan struct{})
	for i := range 2 {
		me, peer := sides[i], sides[1-i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			start := time.Now()
			if err := me.out.StartConnect(peer.h.Addr, peer.l.Service, client.ConnectOptions{}, 10*time.Second); err != nil {
				errs <- err
				return
			}
			if took := time.Since(start); took > 300*time.Millisecond {
				errs <- errors.New("the nowait connect waited " + took.String())
				return
			}
			r, err := me.l.GetRequest(ctx)
			if err != nil {
				errs <- err
				return
			}
			if r.Peer != peer.h.Addr {
				errs <- errors.New("request from " + r.Peer.String())
				return
			}
			errs <- r.Accept(me.in, nil)
		}()
	}
	close(gate)
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range sides {
		for _, q := range []*client.QP{s.out, s.in} {
			if e := waitEvent(t, q); e.Type != client.EventConnected {
				t.Fatalf("side %d, queue pair %d: event %+v, want connected", i, q.Num, e)
			}
		}
	}
	for i, s := range sides {
		if err := s.out.PostSend(1, s.mr, 0, 4096); err != nil {
			t.Fatal(err)
		}
		if c := wait(t, s.out); c.Err() != nil || c.Op != client.CompSend {
			t.Fatalf("side %d: send %+v (%v)", i, c, c.Err())
		}
	}
	for i, s := range sides {
		peer := sides[1-i]
		if c := wait(t, s.in); c.Err() != nil || c.Op != client.CompRecv || c.WRID != 9 || c.Bytes != 4096 {
			t.Fatalf("side %d: receive %+v (%v)", i, c, c.Err())
		}
		same(t, "received", s.mr.Bytes()[4096:], peer.mr.Bytes()[:4096])
	}
}

// TestConnectNoWaitFails: a nowait connect that fails reports it as the
// event a waiting connect reports when it gives up, and nothing else: a
// refusal (nothing listens on the number) is EventFailed with status
// rejected at once; a peer that never answers is EventRetryExceeded at
// the deadline, not before (the CONNECTs go on past the transport's own
// schedule) and not much after; without a deadline, after the
// transport's schedule. query_qp agrees.
func TestConnectNoWaitFails(t *testing.T) {
	var cut atomic.Bool
	ha, hb := newCutHosts(t, transport.Config{}, &cut)
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	qb, err := cb.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		cut      bool
		timeout  time.Duration
		min, max time.Duration
		event    client.EventType
		status   error
		reason   string
	}{
		{"refused", false, 10 * time.Second, 0, time.Second, client.EventFailed, client.ErrRejected, "rejected"},
		{"no-answer", true, 1500 * time.Millisecond, 1400 * time.Millisecond, 3 * time.Second,
			client.EventRetryExceeded, client.ErrRetryExceeded, "retry_exceeded"},
		{"no-answer-no-deadline", true, 0, 0, 3 * time.Second, client.EventRetryExceeded, client.ErrRetryExceeded, "retry_exceeded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cut.Store(c.cut)
			defer cut.Store(false)
			qa, err := ca.CreateQP(client.QPOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer qa.Destroy()
			start := time.Now()
			if err := qa.StartConnect(hb.Addr, qb.Num^0x5a5a00, client.ConnectOptions{Token: qb.Token}, c.timeout); err != nil {
				t.Fatal(err)
			}
			startedAtOnce(t, time.Since(start))
			e := waitEvent(t, qa)
			took := time.Since(start)
			if e.Type != c.event || !errors.Is(e.Err(), c.status) {
				t.Fatalf("event %+v (%v), want %v (%v)", e, e.Err(), c.event, c.status)
			}
			if took < c.min || took > c.max {
				t.Fatalf("event after %v, want %v..%v", took, c.min, c.max)
			}
			if a := query(t, qa); a.State != client.QPClosed || a.Reason != c.reason {
				t.Fatalf("query: %+v, want closed (%s)", a, c.reason)
			}
			time.Sleep(50 * time.Millisecond)
			if e, ok := qa.PollEvent(); ok {
				t.Fatalf("a second event %+v", e)
			}
		})
	}
}

// TestConnectNoWaitNeedsEvents: a nowait connect of a queue pair made
// without events is refused (bad_request, saying why: its outcome would
// have nowhere to go), and the queue pair is left idle; one with events,
// of its own or on a shared CQ, is taken, and a shared CQ's entry names
// the queue pair whose connect failed.
func TestConnectNoWaitNeedsEvents(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	raw := dialRaw(t, ha.Sock)
	for _, events := range []bool{false, true} {
		resp, files := raw.do(proto.Request{Header: proto.Header{Op: proto.OpCreateQP}, Events: events})
		for _, f := range files {
			f.Close()
		}
		h, r := raw.try(proto.Request{Header: proto.Header{Op: proto.OpConnect}, QPN: resp.QPN, Peer: hb.Addr.String(),
			RemoteQPN: 0x123456, NoWait: true, TimeoutMS: 5000})
		if !events {
			if h.Code != proto.CodeBadRequest || !strings.Contains(h.Error, "without events") {
				t.Fatalf("nowait connect without events: %s %q", h.Code, h.Error)
			}
			q, _ := raw.do(proto.Request{Header: proto.Header{Op: proto.OpQueryQP}, QPN: resp.QPN})
			if q.State != proto.QPStateIdle {
				t.Fatalf("after the refusal: state %s", q.State)
			}
			continue
		}
		if h.Code != proto.CodeOK || r.QPN != resp.QPN || r.Peer != hb.Addr.String() {
			t.Fatalf("nowait connect with events: %s %q, answer %+v", h.Code, h.Error, r)
		}
	}
	ca := apptest.Dial(t, ha.Sock)
	cq, err := ca.CreateCQ(client.CQOptions{Slots: 16})
	if err != nil {
		t.Fatal(err)
	}
	q, err := ca.CreateQP(client.QPOptions{CQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.StartConnect(hb.Addr, 0x123456, client.ConnectOptions{}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if c := waitCQ(t, cq); c.Op != client.CompEvent || c.Event != client.EventFailed || c.QPN != q.Num ||
		!errors.Is(c.Err(), client.ErrRejected) {
		t.Fatalf("shared CQ entry %+v (%v), want failed (rejected) for %d", c, c.Err(), q.Num)
	}
}

// TestConnectNoWaitGoesAway: a queue pair destroyed, or a session ended,
// while its nowait connect is still trying (a peer that does not answer,
// a 30 s deadline) is freed at once: the engine holds no connection
// afterwards, the daemon nothing of the session, and no goroutine is
// left behind.
func TestConnectNoWaitGoesAway(t *testing.T) {
	var cut atomic.Bool
	cut.Store(true)
	ha, hb := newCutHosts(t, transport.Config{}, &cut)
	ca := apptest.Dial(t, ha.Sock)
	conns := func() int {
		var n int
		if err := ha.Eng.Do(t.Context(), func(transport.Time) { n = ha.Eng.Endpoint().Conns() }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := runtime.NumGoroutine()
	for range 20 {
		q, err := ca.CreateQP(client.QPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.StartConnect(hb.Addr, 0x4242, client.ConnectOptions{}, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := q.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	cx := apptest.Dial(t, ha.Sock)
	for range 20 {
		q, err := cx.CreateQP(client.QPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.StartConnect(hb.Addr, 0x4242, client.ConnectOptions{}, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns(); n != 20 {
		t.Fatalf("%d connections with 20 nowait connects trying", n)
	}
	cx.Close()
	waitCounts(t, ha, 1)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, g := conns(), runtime.NumGoroutine()
		if n == 0 && g <= before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections and %d goroutines (%d before) left after the queue pairs went", n, g, before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// try sends req and returns the answer's header and body, whatever its
// code.
func (s *rawSession) try(req proto.Request) (proto.Header, proto.Response) {
	s.t.Helper()
	s.seq++
	req.V, req.Seq = proto.Version, s.seq
	if err := s.c.Send(req); err != nil {
		s.t.Fatal(err)
	}
	msg, files, err := s.c.Recv()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, f := range files {
		f.Close()
	}
	var resp proto.Response
	h, err := proto.Decode(msg, &resp)
	if err != nil {
		s.t.Fatal(err)
	}
	return h, resp
}
