package control_test

import (
	"context"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/internal/apptest"
	"github.com/metaroce/metaroce/ring"
)

// rawSession is a session over the raw control protocol, for tests that
// must do what the client library never would with what the daemon
// hands out.
type rawSession struct {
	t   *testing.T
	c   *proto.Conn
	seq uint64
}

func dialRaw(t *testing.T, sock string) *rawSession {
	t.Helper()
	c, err := proto.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := &rawSession{t: t, c: c}
	s.do(proto.Request{Header: proto.Header{Op: proto.OpHello}})
	return s
}

// do sends req and returns the answer and its descriptors, failing the
// test on any error.
func (s *rawSession) do(req proto.Request) (proto.Response, []*os.File) {
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
	var resp proto.Response
	h, err := proto.Decode(msg, &resp)
	if err != nil || h.Code != proto.CodeOK {
		s.t.Fatalf("%s: %v %s %v", req.Op, h.Code, h.Error, err)
	}
	return resp, files
}

// attacker is a session that holds a connected queue pair's rings and its
// end of the doorbell raw.
type attacker struct {
	sq, cq *ring.Ring
	bell   int
	qpn    uint32
}

func newAttacker(t *testing.T, ha, hb *apptest.Host) *attacker {
	t.Helper()
	s := dialRaw(t, ha.Sock)
	resp, files := s.do(proto.Request{Header: proto.Header{Op: proto.OpCreateQP}, SQSlots: 64, CQSlots: 64})
	if len(files) != 3 {
		t.Fatalf("create_qp gave %d descriptors, want 3", len(files))
	}
	a := &attacker{qpn: resp.QPN}
	var err error
	if a.sq, err = ring.Attach(dupFile(t, files[0])); err != nil {
		t.Fatal(err)
	}
	if a.cq, err = ring.Attach(dupFile(t, files[1])); err != nil {
		t.Fatal(err)
	}
	a.bell = dupFile(t, files[2])
	for _, f := range files {
		f.Close()
	}
	t.Cleanup(func() { a.sq.Close(); a.cq.Close(); unix.Close(a.bell) })
	// An accomplice on the other host accepts its connection.
	acc := apptest.Dial(t, hb.Sock)
	qb, err := acc.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan error, 1)
	go func() { _, err := qb.Accept(ctx); accepted <- err }()
	s.do(proto.Request{Header: proto.Header{Op: proto.OpConnect}, QPN: a.qpn, Peer: hb.Addr.String(), RemoteQPN: qb.Num, TimeoutMS: 10000})
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	return a
}

func dupFile(t *testing.T, f *os.File) int {
	t.Helper()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// post puts one request on the attacker's send queue (a WRITE under a key
// it never registered: the engine answers it at once with a local
// protection error) and takes every completion there is, leaving the
// completion queue's need-wakeup flag armed so that the engine rings for
// the next one. It never reads its doorbell.
func (a *attacker) post(t *testing.T, wrid uint64) {
	p := a.sq.Producer()
	first, got, err := p.Reserve(1)
	if err != nil {
		t.Error(err)
		return
	}
	if got == 1 {
		w := proto.WR{Op: proto.WRWrite, WRID: wrid, LKey: 0xdead, Length: 8}
		w.Put(p.Slot(first))
		p.Commit(1)
	}
	c := a.cq.Consumer()
	if _, n, err := c.Peek(64); err == nil {
		c.Release(n)
	}
	c.Arm()
}

// TestHostileDoorbells is issue 22's findings 1 and 2. An attacker
// session clears O_NONBLOCK on the doorbell descriptor it was given,
// shrinks its receive buffer, keeps its completion queue's wake-up flag
// armed and posts, so that the engine rings it until its queue is full
// (with the old eventfd doorbell: fill the counter, arm, post one
// request, and the engine's write blocks for good); and it floods the
// engine's end of its doorbell and leaves it in blocking mode (with the
// old shared send-queue eventfd: one fcntl made the engine's read block
// after its next sleep). Meanwhile a victim session's stream of WRITEs,
// with pauses that let the engine sleep and be woken, keeps completing
// byte-exact; a new session, status requests and new queue pairs are
// served; and the daemon stops when told to.
func TestHostileDoorbells(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	a := newAttacker(t, ha, hb)

	// Finding 2: blocking mode on the descriptor, and its queue toward
	// the engine flooded.
	if _, err := unix.FcntlInt(uintptr(a.bell), unix.F_SETFL, 0); err != nil {
		t.Fatal(err)
	}
	flooded := 0
	for {
		if err := unix.Sendto(a.bell, []byte{1}, unix.MSG_DONTWAIT, nil); err != nil {
			break
		}
		flooded++
	}
	// Finding 1: a receive buffer as small as it goes, never read, and
	// the engine made to ring it over and over.
	if err := unix.SetsockoptInt(a.bell, unix.SOL_SOCKET, unix.SO_RCVBUF, 0); err != nil {
		t.Fatal(err)
	}
	// Each completion the engine makes with the flag armed is one ring; a
	// datagram socket's send buffer holds a few hundred (278 one-byte
	// datagrams here): 1500 fill it for sure.
	for i := range 1500 {
		a.post(t, uint64(i))
		for k := 0; k < 100000; k++ { // until the completion is there
			if n, _ := a.cq.Consumer().Available(); n > 0 {
				break
			}
			runtime.Gosched()
		}
	}
	if fl, err := unix.FcntlInt(uintptr(a.bell), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Fatalf("attacker's doorbell flags %#x, %v: want blocking mode", fl, err)
	}
	if n, err := unix.IoctlGetInt(a.bell, unix.SIOCINQ); err != nil || n == 0 {
		t.Fatalf("attacker's doorbell holds %d bytes (%v): the engine never rang it", n, err)
	}
	t.Logf("attacker flooded the engine's end with %d rings", flooded)

	// The attacker keeps at it (a request now and then, rings, flag
	// armed) while the victim works.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var posted atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint64(1000); ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
			}
			a.post(t, i)
			unix.Sendto(a.bell, []byte{1}, unix.MSG_DONTWAIT, nil)
			posted.Add(1)
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	cv, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	const n = 16384
	src := apptest.Region(t, cv, n, 0)
	dst := apptest.Region(t, cb, n, client.RemoteWrite)
	qv, _ := pair(t, cv, cb, hb.Addr)
	for i := range 60 {
		fill(src.Bytes(), uint64(i))
		if err := qv.PostWrite(uint64(i), src, 0, n, dst.Addr, dst.Key); err != nil {
			t.Fatal(err)
		}
		if c := wait(t, qv); c.Err() != nil || c.WRID != uint64(i) {
			t.Fatalf("victim's write %d: %+v %v", i, c, c.Err())
		}
		same(t, "victim's write", dst.Bytes(), src.Bytes())
		if i%10 == 9 {
			time.Sleep(5 * time.Millisecond) // past YieldTime: the engine sleeps, the next post wakes it
		}
	}
	if posted.Load() == 0 {
		t.Fatal("the attacker never posted during the victim's run")
	}
	if ha.Eng.Stats.Sleeps.Load() == 0 {
		t.Fatal("the engine never slept: its wake-up path went untested")
	}
	// The control side still serves everyone.
	if _, err := cv.Session(); err != nil {
		t.Fatal(err)
	}
	late := apptest.Dial(t, ha.Sock)
	if _, err := late.CreateQP(client.QPOptions{}); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { ha.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon did not stop")
	}
	// The attack did fill the attacker's end: count what the engine
	// queued there (far more than one ring: it kept ringing a full,
	// blocking end and never blocked).
	rings := 0
	var b [8]byte
	for {
		if _, _, err := unix.Recvfrom(a.bell, b[:], unix.MSG_DONTWAIT); err != nil {
			break
		}
		rings++
	}
	t.Logf("the engine's rings queued at the attacker's end: %d", rings)
	if rings < 200 {
		t.Errorf("only %d rings queued at the attacker's end: its queue never filled, the attack was not made", rings)
	}
}
