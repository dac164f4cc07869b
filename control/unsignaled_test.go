package control_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/apptest"
)

// TestUnsignaled: unsignaled requests complete only when they fail; the
// signaled ones, and every failure, complete with the application's own
// wr_id (repeated ones included).
func TestUnsignaled(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	src := apptest.Region(t, ca, 1<<16, client.LocalWrite)
	dst := apptest.Region(t, cb, 1<<16, client.RemoteWrite)
	qa, _ := pair(t, ca, cb, hb.Addr)
	fill(src.Bytes(), 5)
	var wrs []client.WR
	for i := range 16 {
		w := client.WR{Op: client.OpWrite, WRID: 7, Local: src, LocalOff: i * 4096, Length: 4096,
			RemoteAddr: dst.Addr + uint64(i*4096), RemoteKey: dst.Key, Unsignaled: true}
		switch i {
		case 5:
			w.RemoteKey ^= 0xdead // refused by the peer: completes although unsignaled
			w.WRID = 55
		case 15:
			w.Unsignaled, w.WRID = false, 99 // the last: signaled
		}
		wrs = append(wrs, w)
	}
	if n, err := qa.Post(wrs...); n != len(wrs) || err != nil {
		t.Fatalf("post: %d %v", n, err)
	}
	var got []client.Completion
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(got) < 2 {
		var c [4]client.Completion
		n, err := qa.WaitCQ(ctx, c[:])
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		got = append(got, c[:n]...)
	}
	if !errors.Is(got[0].Err(), client.ErrRemoteAccess) || got[0].WRID != 55 {
		t.Fatalf("first completion %+v (%v), want the refused request's error", got[0], got[0].Err())
	}
	if got[1].Err() != nil || got[1].WRID != 99 {
		t.Fatalf("second completion %+v (%v), want the signaled one", got[1], got[1].Err())
	}
	time.Sleep(50 * time.Millisecond)
	var c [4]client.Completion
	if n, _ := qa.PollCQ(c[:]); n != 0 {
		t.Fatalf("%d more completions: %+v", n, c[:n])
	}
	for i := range 16 {
		if i == 5 {
			continue
		}
		same(t, "write", dst.Bytes()[i*4096:(i+1)*4096], src.Bytes()[i*4096:(i+1)*4096])
	}
	// The queue pair still takes its full window: unsignaled requests
	// gave their room back.
	for round := range 100 {
		for i := range wrs {
			wrs[i].RemoteKey, wrs[i].Unsignaled = dst.Key, i != len(wrs)-1
		}
		if n, err := qa.Post(wrs...); n != len(wrs) || err != nil {
			t.Fatalf("round %d: post: %d %v", round, n, err)
		}
		if c := wait(t, qa); c.Err() != nil || c.WRID != 99 {
			t.Fatalf("round %d: %+v %v", round, c, c.Err())
		}
	}
}

// TestInline: WRITE and SEND (with immediate) with their data in the work
// request land byte-exact, the caller's buffer reused at once after
// Post; too long inline data is refused by the client, and a slot that
// claims it is refused by the daemon (bad_wr).
func TestInline(t *testing.T) {
	ha, hb := newHosts(t, 0.02, config.Limits{})
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	dst := apptest.Region(t, cb, 4096, client.LocalWrite|client.RemoteWrite)
	qa, qb := pair(t, ca, cb, hb.Addr)
	buf := make([]byte, client.MaxInline)
	var want [2][]byte
	for i := range 2 {
		fill(buf, uint64(i)+40)
		want[i] = append([]byte(nil), buf...)
		op := client.OpWrite
		if i == 1 {
			op = client.OpSendImm
			if err := qb.PostRecv(7, dst, 1000, 100); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := qa.Post(client.WR{Op: op, WRID: uint64(i), Inline: buf, RemoteAddr: dst.Addr, RemoteKey: dst.Key, Imm: 5}); err != nil {
			t.Fatal(err)
		}
		clear(buf) // copied at Post
		if c := wait(t, qa); c.Err() != nil || c.WRID != uint64(i) {
			t.Fatalf("inline %v: %+v %v", op, c, c.Err())
		}
	}
	same(t, "inline write", dst.Bytes()[:client.MaxInline], want[0])
	if c := wait(t, qb); c.Err() != nil || c.Op != client.CompRecv || c.Bytes != client.MaxInline || !c.HasImm || c.Imm != 5 {
		t.Fatalf("inline send at the peer: %+v %v", c, c.Err())
	}
	same(t, "inline send", dst.Bytes()[1000:1000+client.MaxInline], want[1])
	if _, err := qa.Post(client.WR{Op: client.OpWrite, Inline: make([]byte, client.MaxInline+1)}); !errors.Is(err, client.ErrInline) {
		t.Fatalf("too long inline: %v", err)
	}
	if _, err := qa.Post(client.WR{Op: client.OpRead, Inline: buf}); !errors.Is(err, client.ErrInline) {
		t.Fatalf("inline read: %v", err)
	}
}
