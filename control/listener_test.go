package control_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/apptest"
)

// TestListenerManyClients: one listener takes 64 connections from 4
// client sessions and accepts each onto a fresh queue pair; one goroutine
// then serves them all, waiting on one epoll set of their descriptors.
// Each server queue pair SENDs its client a hello (its index, the
// server's region address and key); the client WRITEs with immediate its
// own bytes into that slot; every slot lands byte-exact.
func TestListenerManyClients(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	srv := apptest.Dial(t, ha.Sock)
	l, err := srv.Listen(client.ListenOptions{Backlog: 64})
	if err != nil {
		t.Fatal(err)
	}
	if l.Local != ha.Addr || l.Service == 0 {
		t.Fatalf("listener %+v", l)
	}
	const sessions, perSession, size = 4, 16, 4096
	const n = sessions * perSession
	land := apptest.Region(t, srv, n*size, client.LocalWrite|client.RemoteWrite)
	hello := apptest.Region(t, srv, n*16, 0)

	var wg sync.WaitGroup
	errc := make(chan error, n)
	for range sessions {
		c := apptest.Dial(t, hb.Sock)
		mr := apptest.Region(t, c, perSession*(size+16), client.LocalWrite)
		wg.Add(1)
		go func() { // one goroutine per session: its requests are answered in turn
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			qs := make([]*client.QP, perSession)
			for k := range qs {
				q, err := c.CreateQP(client.QPOptions{})
				if err != nil {
					errc <- err
					return
				}
				// The receive for the server's hello, before connecting:
				// taken as soon as the connection is up.
				if err := q.PostRecv(0, mr, perSession*size+k*16, 16); err != nil {
					errc <- err
					return
				}
				// The connect waits for the server's accept, and brings
				// back its private data.
				priv, err := q.ConnectWith(ctx, ha.Addr, l.Service, client.ConnectOptions{Token: l.Token, Private: []byte{byte(k), 0xa5}})
				if err != nil {
					errc <- err
					return
				}
				if string(priv) != "ok" {
					errc <- fmt.Errorf("the accept's private data %q, want ok", priv)
					return
				}
				qs[k] = q
			}
			for k, q := range qs {
				if c, err := waitOp(ctx, q, client.CompRecv); err != nil || c.Bytes != 16 {
					errc <- errors.Join(err, c.Err())
					return
				}
				h := mr.Bytes()[perSession*size+k*16:][:16]
				i, raddr, rkey := binary.LittleEndian.Uint32(h), binary.LittleEndian.Uint64(h[4:]), binary.LittleEndian.Uint32(h[12:])
				fill(mr.Bytes()[k*size:(k+1)*size], uint64(i)+100)
				if err := q.PostWriteImm(1, mr, k*size, size, raddr+uint64(i)*size, rkey, i); err != nil {
					errc <- err
					return
				}
				if c, err := waitOp(ctx, q, client.CompWrite); err != nil || c.Err() != nil {
					errc <- errors.Join(err, c.Err())
					return
				}
			}
		}()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ep)
	qs := make([]*client.QP, 0, n)
	byFD := map[int32]int{}
	for len(qs) < n {
		r, err := l.GetRequest(ctx)
		if err != nil {
			t.Fatalf("after %d requests: %v", len(qs), err)
		}
		if r.Peer != hb.Addr || len(r.Private) != 2 || r.Private[1] != 0xa5 {
			t.Fatalf("request from %v with private data % x", r.Peer, r.Private)
		}
		q, err := srv.CreateQP(client.QPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Accept(q, []byte("ok")); err != nil {
			t.Fatal(err)
		}
		i := len(qs)
		h := hello.Bytes()[i*16:][:16]
		binary.LittleEndian.PutUint32(h, uint32(i))
		binary.LittleEndian.PutUint64(h[4:], land.Addr)
		binary.LittleEndian.PutUint32(h[12:], land.Key)
		if _, err := q.Post(client.WR{Op: client.OpSend, WRID: uint64(i), Local: hello, LocalOff: i * 16, Length: 16, Unsignaled: true}); err != nil {
			t.Fatal(err)
		}
		byFD[int32(q.FD())] = i
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, q.FD(), &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(q.FD())}); err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
	}

	// Serve: one goroutine, one epoll set.
	got := make([]bool, n)
	done := 0
	var evs [16]unix.EpollEvent
	var cqe [8]client.Completion
	poll := func(i int) {
		k, err := qs[i].PollCQ(cqe[:])
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cqe[:k] {
			if c.Err() != nil || c.Op != client.CompRecvWriteImm || c.Imm != uint32(i) || c.Bytes != size || got[i] {
				t.Fatalf("queue pair %d: completion %+v (%v)", i, c, c.Err())
			}
			got[i] = true
			done++
		}
	}
	for done < n {
		for i := range qs {
			// Arm, or poll what is there and try again (an event in the
			// queue also refuses the arming, and is moved aside by the
			// poll).
			for {
				armed, err := qs[i].ReqNotify()
				if err != nil {
					t.Fatal(err)
				}
				if armed {
					break
				}
				poll(i)
			}
		}
		if done == n {
			break
		}
		k, err := unix.EpollWait(ep, evs[:], 10000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || k == 0 {
			t.Fatalf("epoll_wait: %d %v with %d of %d served", k, err, done, n)
		}
		for _, ev := range evs[:k] {
			i := byFD[ev.Fd]
			qs[i].AckNotify()
			poll(i)
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	want := make([]byte, size)
	for i := range n {
		fill(want, uint64(i)+100)
		same(t, "slot", land.Bytes()[i*size:(i+1)*size], want)
	}
	// Closing the listener leaves the accepted connections alone.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if a := query(t, qs[0]); a.State != client.QPConnected {
		t.Fatalf("after the listener closed: %+v", a)
	}
}

// TestListenerReject: a rejected request fails the peer's connect with
// the application's reason and private data (a *client.RejectedError); a
// request decided twice is not found; a connect without the listener's
// token fails as one to a number nothing listens on, and makes no
// request; a session's end closes its listener.
func TestListenerReject(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	srv, cl := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	l, err := srv.Listen(client.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := cl.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// With nothing waiting, a poll answers at once with no request.
	if r, err := l.PollRequest(); r != nil || err != nil {
		t.Fatalf("poll with none waiting: %v, %v", r, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := q.ConnectWith(ctx, ha.Addr, l.Service, client.ConnectOptions{Token: l.Token, Private: []byte("may I?")})
		done <- err
	}()
	// The request reaches the backlog when the server's engine has seen
	// the CONNECT through: polls take it then.
	var r *client.ConnRequest
	for r == nil {
		if r, err = l.PollRequest(); err != nil {
			t.Fatal(err)
		}
		if r == nil {
			if ctx.Err() != nil {
				t.Fatal("no request after the connect")
			}
			time.Sleep(time.Millisecond)
		}
	}
	if r.Peer != hb.Addr {
		t.Fatalf("request from %v, want %v", r.Peer, hb.Addr)
	}
	if string(r.Private) != "may I?" {
		t.Fatalf("request's private data %q", r.Private)
	}
	if err := r.Reject(503, []byte("busy: retry in 5 s")); err != nil {
		t.Fatal(err)
	}
	if err := r.Reject(1, nil); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("second reject: %v", err)
	}
	var rej *client.RejectedError
	if err := <-done; !errors.As(err, &rej) || !errors.Is(err, client.ErrConnect) {
		t.Fatalf("connect after the reject: %v", err)
	}
	if rej.Reason != "application" || rej.AppReason != 503 || string(rej.Private) != "busy: retry in 5 s" {
		t.Fatalf("rejection %+v", rej)
	}
	// Without the token: refused as if nothing listened, no request.
	qx, err := cl.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := qx.Connect(ctx, ha.Addr, l.Service, l.Token^1); !errors.As(err, &rej) || rej.Reason != "no_service" {
		t.Fatalf("connect with a wrong token: %v", err)
	}
	qy, err := cl.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := qy.Connect(ctx, ha.Addr, l.Service^0x5a5a, l.Token); !errors.As(err, &rej) || rej.Reason != "no_service" {
		t.Fatalf("connect to no listener: %v", err)
	}
	// GetRequest with nothing waiting ends with its context.
	sctx, scancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer scancel()
	if _, err := l.GetRequest(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("get_request with none: %v", err)
	}
	srv.Close()
	waitCounts(t, ha, 0)
	q2, err := cl.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q2.Connect(ctx, ha.Addr, l.Service, l.Token); !errors.Is(err, client.ErrConnect) {
		t.Fatalf("connect to the listener of a closed session: %v", err)
	}
}

// waitOp waits for a completion of op, failing on an error completion.
func waitOp(ctx context.Context, q *client.QP, op client.CompletionOp) (client.Completion, error) {
	var c [1]client.Completion
	for {
		if _, err := q.WaitCQ(ctx, c[:]); err != nil {
			return c[0], err
		}
		if err := c[0].Err(); err != nil || c[0].Op == op {
			return c[0], err
		}
	}
}
