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
	s.do(proto.Request{Header: proto.Header{Op: proto.OpConnect}, QPN: a.qpn, Peer: hb.Addr.String(), RemoteQPN: qb.Num, Token: qb.Token, TimeoutMS: 10000})
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
		// Announced as the protocol asks of a post to an idle queue
		// pair, whose send queue the engine no longer polls (driver.go,
		// Step): a ring (always here, which an application may do).
		unix.Sendto(a.bell, []byte{1}, unix.MSG_DONTWAIT, nil)
	}
	c := a.cq.Consumer()
	if _, n, err := c.Peek(64); err == nil {
		c.Release(n)
	}
	c.Arm()
}

// fillCQBell is finding 1 of issue 22, on the attacker's doorbell end:
// blocking mode, a receive buffer as small as it goes, never read, the
// completion queue's wake-up flag kept armed and requests posted, so that
// the engine rings it until its queue is full. (With the old eventfd
// doorbell: fill the counter, arm, post one request, and the engine's
// write blocked for good.)
func (a *attacker) fillCQBell(t *testing.T) {
	if _, err := unix.FcntlInt(uintptr(a.bell), unix.F_SETFL, 0); err != nil {
		t.Fatal(err)
	}
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
}

// floodSQBell is finding 2: blocking mode on the descriptor the
// application rings the engine through (with the old design one eventfd
// every session of the engine shared, whose flags one fcntl changed for
// all), and the engine's end flooded with rings. It returns how many.
func (a *attacker) floodSQBell(t *testing.T) int {
	if _, err := unix.FcntlInt(uintptr(a.bell), unix.F_SETFL, 0); err != nil {
		t.Fatal(err)
	}
	n := 0
	for unix.Sendto(a.bell, []byte{1}, unix.MSG_DONTWAIT, nil) == nil {
		n++
	}
	if n == 0 {
		t.Fatal("the attacker could not ring the engine's end")
	}
	return n
}

// queuedRings drains and counts the rings waiting at the attacker's end.
func (a *attacker) queuedRings() int {
	rings := 0
	var b [8]byte
	for {
		if _, _, err := unix.Recvfrom(a.bell, b[:], unix.MSG_DONTWAIT); err != nil {
			return rings
		}
		rings++
	}
}

// victimRuns checks that, while the attacker keeps at it (a request, a
// ring to the engine, its flag armed, every 3 ms), a victim session's
// WRITEs complete byte-exact, with pauses that let the engine sleep and
// be woken; that a new session, status requests and new queue pairs are
// served; and that the daemon stops when told to.
func victimRuns(t *testing.T, ha, hb *apptest.Host, a *attacker) {
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
	sleeps := ha.Eng.Stats.Sleeps.Load()
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
	if ha.Eng.Stats.Sleeps.Load() == sleeps {
		t.Fatal("the engine never slept during the victim's run: its wake-up path went untested")
	}
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
}

// TestHostileCQDoorbell is issue 22's finding 1: an attacker session
// leaves the doorbell end it was given in blocking mode with a full
// queue, and has the engine keep ringing it; the engine never blocks,
// and a victim session's stream keeps working.
func TestHostileCQDoorbell(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	a := newAttacker(t, ha, hb)
	a.fillCQBell(t)
	victimRuns(t, ha, hb, a)
	// The attack did fill the attacker's end: the engine kept ringing a
	// full end in blocking mode and never blocked.
	rings := a.queuedRings()
	t.Logf("the engine's rings queued at the attacker's end: %d", rings)
	if rings < 200 {
		t.Errorf("only %d rings queued at the attacker's end: its queue never filled, the attack was not made", rings)
	}
}

// TestHostileSQDoorbell is issue 22's finding 2: an attacker session
// clears O_NONBLOCK on the descriptor it rings the engine through and
// floods the engine's end; its doorbell is its own queue pair's (another
// session's is another socket), the engine's reads of its end cannot
// block, and a victim session's stream, through engine sleeps and
// wake-ups, keeps working.
func TestHostileSQDoorbell(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	a := newAttacker(t, ha, hb)
	other := newAttacker(t, ha, hb)
	var sa, so unix.Stat_t
	if err := unix.Fstat(a.bell, &sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(other.bell, &so); err != nil {
		t.Fatal(err)
	}
	if sa.Ino == so.Ino {
		t.Fatal("two sessions' queue pairs were given the same doorbell")
	}
	t.Logf("attacker flooded the engine's end with %d rings", a.floodSQBell(t))
	victimRuns(t, ha, hb, a)
}
