package control_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/internal/apptest"
	"golang.org/x/sys/unix"
)

// registerUnsealed offers the daemon a memfd without F_SEAL_SHRINK, over
// the raw protocol (the client library always seals).
func registerUnsealed(t *testing.T, h *apptest.Host) proto.Code {
	t.Helper()
	c, err := proto.Dial(h.Sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fd, err := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, 4096); err != nil {
		t.Fatal(err)
	}
	req := proto.Request{Header: proto.Header{V: proto.Version, Op: proto.OpRegister, Seq: 1}, Length: 4096, Access: proto.AccessRemoteWrite}
	if err := c.Send(req, fd); err != nil {
		t.Fatal(err)
	}
	msg, files, err := c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		f.Close()
	}
	var resp proto.Response
	h2, err := proto.Decode(msg, &resp)
	if err != nil {
		t.Fatal(err)
	}
	return h2.Code
}

// TestVerbs runs every operation between two daemons over a link that
// drops 1% of packets, checking every byte where it lands.
func TestVerbs(t *testing.T) {
	ha, hb := newHosts(t, 0.01, config.Limits{})
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	const n = 1 << 20
	src := apptest.Region(t, ca, n, client.LocalWrite)
	dst := apptest.Region(t, cb, n, client.LocalWrite|client.RemoteWrite|client.RemoteRead)
	qa, qb := pair(t, ca, cb, hb.Addr)

	// WRITE, then WRITE with immediate: the peer sees the immediate.
	fill(src.Bytes(), 1)
	if err := qa.PostWrite(1, src, 0, n, dst.Addr, dst.Key); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qa); c.Err() != nil || c.WRID != 1 || c.Op != client.CompWrite {
		t.Fatalf("write completion %+v: %v", c, c.Err())
	}
	same(t, "write", dst.Bytes(), src.Bytes())
	fill(src.Bytes()[:4096], 2)
	if err := qa.PostWriteImm(2, src, 0, 4096, dst.Addr+8192, dst.Key, 0xfeed); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qa); c.Err() != nil || c.WRID != 2 {
		t.Fatalf("write-imm completion %+v: %v", c, c.Err())
	}
	if c := wait(t, qb); c.Op != client.CompRecvWriteImm || !c.HasImm || c.Imm != 0xfeed || c.Bytes != 4096 {
		t.Fatalf("peer's completion %+v", c)
	}
	same(t, "write-imm", dst.Bytes()[8192:8192+4096], src.Bytes()[:4096])

	// READ back into another place of src.
	fill(dst.Bytes()[:65536], 3)
	if err := qa.PostRead(3, src, 100000, 65536, dst.Addr, dst.Key); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qa); c.Err() != nil || c.Op != client.CompRead || c.WRID != 3 {
		t.Fatalf("read completion %+v: %v", c, c.Err())
	}
	same(t, "read", src.Bytes()[100000:100000+65536], dst.Bytes()[:65536])

	// SEND into a posted receive.
	if err := qb.PostRecv(10, dst, 500000, 10000); err != nil {
		t.Fatal(err)
	}
	fill(src.Bytes()[:7000], 4)
	if err := qa.PostSend(4, src, 0, 7000); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qa); c.Err() != nil || c.Op != client.CompSend {
		t.Fatalf("send completion %+v: %v", c, c.Err())
	}
	if c := wait(t, qb); c.Err() != nil || c.Op != client.CompRecv || c.WRID != 10 || c.Bytes != 7000 {
		t.Fatalf("recv completion %+v: %v", c, c.Err())
	}
	same(t, "send", dst.Bytes()[500000:507000], src.Bytes()[:7000])
}

// TestForgedAndStaleKeys: a WRITE under a key the peer never gave, or one
// it has deregistered, writes nothing and completes with a remote access
// error at the sender; the connection stays usable.
func TestForgedAndStaleKeys(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	src := apptest.Region(t, ca, 65536, 0)
	dst := apptest.Region(t, cb, 65536, client.RemoteWrite)
	other := apptest.Region(t, cb, 65536, client.RemoteRead) // no remote write
	qa, _ := pair(t, ca, cb, hb.Addr)
	fill(src.Bytes(), 9)
	for _, tc := range []struct {
		name string
		addr uint64
		key  uint32
	}{
		{"forged key", dst.Addr, dst.Key ^ 0x5a5a5a5a},
		{"out of range", dst.Addr + 65536 - 100, dst.Key},
		{"no remote write", other.Addr, other.Key},
	} {
		if err := qa.PostWrite(1, src, 0, 4096, tc.addr, tc.key); err != nil {
			t.Fatal(err)
		}
		if c := wait(t, qa); !errors.Is(c.Err(), client.ErrRemoteAccess) {
			t.Errorf("%s: completion %v, want a remote access error", tc.name, c.Err())
		}
	}
	for i, b := range dst.Bytes() {
		if b != 0 {
			t.Fatalf("refused writes changed byte %d of the target", i)
		}
	}
	// Deregistered: the key is stale.
	stale := dst.Key
	if err := dst.Deregister(); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostWrite(2, src, 0, 4096, dst.Addr, stale); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qa); !errors.Is(c.Err(), client.ErrRemoteAccess) {
		t.Errorf("stale key: completion %v, want a remote access error", c.Err())
	}
	// Still usable with a good key.
	ok := apptest.Region(t, cb, 65536, client.RemoteWrite)
	if err := qa.PostWrite(3, src, 0, 65536, ok.Addr, ok.Key); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qa); c.Err() != nil {
		t.Fatalf("good write after refusals: %v", c.Err())
	}
	same(t, "write after refusals", ok.Bytes(), src.Bytes())
}

// TestLocalErrors: a range outside the region fails at Post; a
// deregistered lkey, or a READ into memory without local write, fails
// with a local protection completion.
func TestLocalErrors(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	src := apptest.Region(t, ca, 8192, 0)
	dst := apptest.Region(t, cb, 8192, client.RemoteWrite|client.RemoteRead)
	qa, _ := pair(t, ca, cb, hb.Addr)
	if err := qa.PostWrite(1, src, 4096, 8192, dst.Addr, dst.Key); !errors.Is(err, client.ErrOutOfRange) {
		t.Errorf("range beyond the region: %v", err)
	}
	if err := qa.PostRead(2, src, 0, 4096, dst.Addr, dst.Key); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qa); !errors.Is(c.Err(), client.ErrLocalProtection) || c.WRID != 2 {
		t.Errorf("read into memory without local write: %+v %v", c, c.Err())
	}
	if err := src.Deregister(); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostWrite(3, src, 0, 4096, dst.Addr, dst.Key); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, qa); !errors.Is(c.Err(), client.ErrLocalProtection) || c.WRID != 3 {
		t.Errorf("deregistered lkey: %+v %v", c, c.Err())
	}
}

// TestLimitsAndReclaim: a session is held to its limits, and what it held
// is gone from the daemon's counts when it closes.
func TestLimitsAndReclaim(t *testing.T) {
	ha, _ := newHosts(t, 0, config.Limits{MaxRegionsPerSession: 2, MaxRegionBytesPerSession: 1 << 20, MaxQPsPerSession: 1})
	c, err := client.Dial(ha.Sock)
	if err != nil {
		t.Fatal(err)
	}
	m, err := client.Alloc(2 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := c.RegisterMemory(m, 0, 2<<20, 0); !errors.Is(err, client.ErrLimit) {
		t.Errorf("2 MiB over a 1 MiB limit: %v", err)
	}
	for i := range 2 {
		if _, err := c.RegisterMemory(m, i*4096, 4096, client.RemoteWrite); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.RegisterMemory(m, 8192, 4096, 0); !errors.Is(err, client.ErrLimit) {
		t.Errorf("third region: %v", err)
	}
	if _, err := c.CreateQP(client.QPOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQP(client.QPOptions{}); !errors.Is(err, client.ErrLimit) {
		t.Errorf("second queue pair: %v", err)
	}
	if got := ha.Srv.Counts(); got.Sessions != 1 || got.Regions != 2 || got.QPs != 1 || got.Bytes != 8192 {
		t.Errorf("counts with one session %+v", got)
	}
	c.Close()
	waitCounts(t, ha, 0)
}

// TestBadRegistrations: memory the daemon cannot safely map is refused.
func TestBadRegistrations(t *testing.T) {
	ha, _ := newHosts(t, 0, config.Limits{})
	c := apptest.Dial(t, ha.Sock)
	m, err := client.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := c.RegisterMemory(m, 0, 8192, 0); !errors.Is(err, client.ErrOutOfRange) {
		t.Errorf("past the end: %v", err)
	}
	if code := registerUnsealed(t, ha); code != proto.CodeBadRegion {
		t.Errorf("unsealed memfd: %q, want %q", code, proto.CodeBadRegion)
	}
}

// TestDaemonGone: a daemon that stops wakes a waiting client with
// ErrDaemonGone, and later calls fail the same way.
func TestDaemonGone(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	qa, _ := pair(t, ca, cb, hb.Addr)
	errc := make(chan error, 1)
	go func() {
		var c [1]client.Completion
		_, err := qa.WaitCQ(t.Context(), c[:])
		errc <- err
	}()
	ha.Stop()
	if err := <-errc; !errors.Is(err, client.ErrDaemonGone) {
		t.Fatalf("wait: %v", err)
	}
	if _, err := ca.CreateQP(client.QPOptions{}); !errors.Is(err, client.ErrDaemonGone) {
		t.Fatalf("create after the daemon went: %v", err)
	}
}

// TestSendQueueFullAndDeadline: a send queue that nobody drains (its
// queue pair is not connected) fills and refuses more with ErrSQFull,
// and a wait for a completion that cannot come ends with its context.
func TestSendQueueFullAndDeadline(t *testing.T) {
	ha, _ := newHosts(t, 0, config.Limits{})
	c := apptest.Dial(t, ha.Sock)
	mr := apptest.Region(t, c, 4096, 0)
	q, err := c.CreateQP(client.QPOptions{SQSlots: 2, CQSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	wr := client.WR{Op: client.OpWrite, Local: mr, Length: 64, RemoteAddr: 1, RemoteKey: 1}
	if n, err := q.Post(wr, wr, wr); n != 2 || err != nil {
		t.Fatalf("three into a two-slot queue: %d posted, %v", n, err)
	}
	if _, err := q.Post(wr); !errors.Is(err, client.ErrSQFull) {
		t.Fatalf("into a full queue: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var cq [1]client.Completion
	if _, err := q.WaitCQ(ctx, cq[:]); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on an idle queue pair: %v", err)
	}
}

// TestWakeUps: each side is asleep when the other has something for it.
// The engines sleep (nothing happened for longer than their yield time)
// when a WRITE with immediate is posted, so the post must ring A's engine;
// B's application waits for it past its spin, asleep on its doorbell, so
// B's engine must ring it. A lost ring would leave a wait to its 10 s
// deadline.
func TestWakeUps(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	src := apptest.Region(t, ca, 4096, 0)
	dst := apptest.Region(t, cb, 4096, client.RemoteWrite)
	qa, qb := pair(t, ca, cb, hb.Addr)
	for i := range 5 {
		sa, sb := ha.Eng.Stats.Sleeps.Load(), hb.Eng.Stats.Sleeps.Load()
		posted := make(chan error, 1)
		go func() {
			time.Sleep(20 * time.Millisecond) // B's application and both engines fall asleep
			posted <- qa.PostWriteImm(uint64(i), src, 0, 64, dst.Addr, dst.Key, uint32(i))
		}()
		if c := wait(t, qb); c.Op != client.CompRecvWriteImm || c.Imm != uint32(i) {
			t.Fatalf("B's completion %+v", c)
		}
		if err := <-posted; err != nil {
			t.Fatal(err)
		}
		if c := wait(t, qa); c.Err() != nil || c.WRID != uint64(i) {
			t.Fatalf("A's completion %+v %v", c, c.Err())
		}
		if ha.Eng.Stats.Sleeps.Load() == sa || hb.Eng.Stats.Sleeps.Load() == sb {
			t.Fatal("an engine never slept in 20 ms of quiet")
		}
	}
}
