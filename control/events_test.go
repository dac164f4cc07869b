package control_test

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/apptest"
	"github.com/metaroce/metaroce/transport"
)

// cutLink is a link that, once cut, drops everything it receives: the
// peer vanishes as a crashed host or a pulled cable does, without a word.
type cutLink struct {
	dataplane.Link
	cut *atomic.Bool
}

func (l cutLink) Receive(batch []dataplane.RxPacket) int {
	n := l.Link.Receive(batch)
	if n > 0 && l.cut.Load() {
		l.Link.Release(batch[:n])
		return 0
	}
	return n
}

// newCutHosts is newHosts with a cable that cut cuts, and cfg for both.
func newCutHosts(t testing.TB, cfg transport.Config, cut *atomic.Bool) (*apptest.Host, *apptest.Host) {
	t.Helper()
	a, b := netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2")
	la, lb := dataplane.NewMemPair(a, b, 9000, 0, 7)
	dir := t.TempDir()
	return apptest.Start(t, a, cutLink{la, cut}, cfg, config.Limits{}, filepath.Join(dir, "a.sock")),
		apptest.Start(t, b, cutLink{lb, cut}, cfg, config.Limits{}, filepath.Join(dir, "b.sock"))
}

// waitEvent takes one event, failing the test after 10 s.
func waitEvent(t *testing.T, q *client.QP) client.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := q.WaitEvent(ctx)
	if err != nil {
		t.Fatalf("wait for an event of queue pair %d: %v", q.Num, err)
	}
	return e
}

func query(t *testing.T, q *client.QP) client.QPAttr {
	t.Helper()
	a, err := q.Query(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestEventsPeerClosed: a peer that destroys its queue pair, or whose
// session ends (the application killed), shows up as EventPeerClosed on
// the other side, and a wait for completions there ends with ErrPeerClosed
// instead of waiting for its context.
func TestEventsPeerClosed(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	ca := apptest.Dial(t, ha.Sock)
	for _, how := range []string{"destroy", "session-end"} {
		t.Run(how, func(t *testing.T) {
			cb := apptest.Dial(t, hb.Sock)
			qa, qb := pair(t, ca, cb, hb.Addr)
			if a := query(t, qa); a.State != client.QPConnected || a.Peer != hb.Addr {
				t.Fatalf("query after connect: %+v", a)
			}
			if e := waitEvent(t, qb); e.Type != client.EventConnected || e.Err() != nil {
				t.Fatalf("acceptor's first event %+v", e)
			}
			if how == "destroy" {
				if err := qb.Destroy(); err != nil {
					t.Fatal(err)
				}
			} else {
				cb.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var c [1]client.Completion
			_, err := qa.WaitCQ(ctx, c[:])
			if !errors.Is(err, client.ErrPeerClosed) || !errors.Is(err, client.ErrConnLost) {
				t.Fatalf("WaitCQ after the peer closed: %v, want ErrPeerClosed", err)
			}
			if e := waitEvent(t, qa); e.Type != client.EventConnected {
				t.Fatalf("first event %+v, want connected", e)
			}
			if e := waitEvent(t, qa); e.Type != client.EventPeerClosed {
				t.Fatalf("second event %+v, want peer closed", e)
			}
			if _, ok := qa.PollEvent(); ok {
				t.Fatal("a third event")
			}
			if qa.State() != client.QPClosed {
				t.Fatalf("state %v", qa.State())
			}
			if a := query(t, qa); a.State != client.QPClosed || a.Reason != "flushed" {
				t.Fatalf("query after the peer closed: %+v", a)
			}
			qa.Destroy()
		})
	}
}

// TestEventsDaemonGone: a daemon that dies shows up as EventDaemonGone on
// every queue pair of its clients, after their connected events.
func TestEventsDaemonGone(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	var qs []*client.QP
	for range 4 {
		qa, _ := pair(t, ca, cb, hb.Addr)
		qs = append(qs, qa)
	}
	idle, err := ca.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := query(t, idle); a.State != client.QPIdle || a.Peer.IsValid() {
		t.Fatalf("query of an idle queue pair: %+v", a)
	}
	ha.Stop()
	for i, q := range qs {
		if e := waitEvent(t, q); e.Type != client.EventConnected {
			t.Fatalf("queue pair %d: first event %+v", i, e)
		}
		e := waitEvent(t, q)
		if e.Type != client.EventDaemonGone || !errors.Is(e.Err(), client.ErrDaemonGone) {
			t.Fatalf("queue pair %d: event %+v, want daemon gone", i, e)
		}
	}
	if e := waitEvent(t, idle); e.Type != client.EventDaemonGone {
		t.Fatalf("idle queue pair: event %+v", e)
	}
}

// TestEventsPeerVanished: a peer that vanishes without a word (its host
// crashed) stops answering; the WRITE posted meanwhile fails with
// ErrRetryExceeded, and the queue pair reports EventRetryExceeded after
// it.
func TestEventsPeerVanished(t *testing.T) {
	var cut atomic.Bool
	ha, hb := newCutHosts(t, transport.Config{}, &cut)
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	src := apptest.Region(t, ca, 4096, client.LocalWrite)
	dst := apptest.Region(t, cb, 4096, client.RemoteWrite)
	qa, _ := pair(t, ca, cb, hb.Addr)
	cut.Store(true)
	if err := qa.PostWrite(1, src, 0, 4096, dst.Addr, dst.Key); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qa); !errors.Is(c.Err(), client.ErrRetryExceeded) {
		t.Fatalf("write to a dead peer: %+v %v", c, c.Err())
	}
	waitEvent(t, qa) // connected
	e := waitEvent(t, qa)
	if e.Type != client.EventRetryExceeded || !errors.Is(e.Err(), client.ErrRetryExceeded) {
		t.Fatalf("event %+v (%v), want retry exceeded", e, e.Err())
	}
	if a := query(t, qa); a.State != client.QPClosed || a.Reason != "retry_exceeded" {
		t.Fatalf("query: %+v", a)
	}
}

// TestEventsIdlePeerVanished: an idle connection whose peer vanishes
// without a word is failed by its keepalive within (probes+1) intervals,
// and the application sees EventRetryExceeded without posting anything.
func TestEventsIdlePeerVanished(t *testing.T) {
	var cut atomic.Bool
	const iv = 100 * time.Millisecond
	ha, hb := newCutHosts(t, transport.Config{KeepaliveInterval: iv, KeepaliveProbes: 3}, &cut)
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	qa, qb := pair(t, ca, cb, hb.Addr)
	waitEvent(t, qa)
	waitEvent(t, qb)
	time.Sleep(3 * iv) // idle, both alive: the probes are answered
	if a := query(t, qa); a.State != client.QPConnected {
		t.Fatalf("idle connection to a live peer: %+v", a)
	}
	cut.Store(true)
	start := time.Now()
	for _, q := range []*client.QP{qa, qb} {
		e := waitEvent(t, q)
		if e.Type != client.EventRetryExceeded {
			t.Fatalf("queue pair %d: event %+v, want retry exceeded", q.Num, e)
		}
	}
	if took := time.Since(start); took > 4*iv+time.Second {
		t.Errorf("noticed %v after the cut, keepalive budget %v", took, 4*iv)
	}
}

// TestNotifyFD: a completion queue's descriptor, armed, becomes readable
// for epoll when a completion arrives, and ReqNotify refuses to arm while
// entries wait.
func TestNotifyFD(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	src := apptest.Region(t, ca, 4096, client.LocalWrite)
	dst := apptest.Region(t, cb, 4096, client.RemoteWrite)
	qa, _ := pair(t, ca, cb, hb.Addr)
	waitEvent(t, qa) // connected
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ep)
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, qa.FD(), &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(qa.FD())}); err != nil {
		t.Fatal(err)
	}
	var evs [1]unix.EpollEvent
	for i := range 20 {
		armed, err := qa.ReqNotify()
		if err != nil || !armed {
			t.Fatalf("round %d: ReqNotify on an empty queue: %v %v", i, armed, err)
		}
		if n, _ := unix.EpollWait(ep, evs[:], 0); n != 0 {
			t.Fatalf("round %d: readable before any completion", i)
		}
		if err := qa.PostWrite(uint64(i), src, 0, 4096, dst.Addr, dst.Key); err != nil {
			t.Fatal(err)
		}
		// A wake-up is a hint (a ring left from an earlier sleep may
		// come first): poll after it, and arm again if nothing is there.
		var c [1]client.Completion
		for tries := 0; ; tries++ {
			n, err := unix.EpollWait(ep, evs[:], 10000)
			for errors.Is(err, unix.EINTR) {
				n, err = unix.EpollWait(ep, evs[:], 10000)
			}
			if n != 1 || err != nil {
				t.Fatalf("round %d: epoll_wait %d %v, want the descriptor readable", i, n, err)
			}
			qa.AckNotify()
			n, err = qa.PollCQ(c[:])
			if err != nil || n == 1 {
				break
			}
			if tries == 3 {
				t.Fatalf("round %d: %d wake-ups without the completion", i, tries+1)
			}
			if armed, err := qa.ReqNotify(); err != nil {
				t.Fatal(err)
			} else if !armed {
				break
			}
		}
		if c[0].WRID != uint64(i) || c[0].Err() != nil {
			if c[0].Op == 0 { // the re-arm found it there: take it
				c[0] = wait(t, qa)
			}
			if c[0].WRID != uint64(i) || c[0].Err() != nil {
				t.Fatalf("round %d: completion %+v %v", i, c[0], c[0].Err())
			}
		}
	}
	// An entry already there: ReqNotify says poll instead.
	if err := qa.PostWrite(99, src, 0, 4096, dst.Addr, dst.Key); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		armed, err := qa.ReqNotify()
		if err != nil {
			t.Fatal(err)
		}
		if !armed {
			break
		}
		qa.AckNotify()
		if time.Now().After(deadline) {
			t.Fatal("the completion never came")
		}
		time.Sleep(time.Millisecond)
	}
	if c := wait(t, qa); c.WRID != 99 {
		t.Fatalf("completion %+v", c)
	}
}
