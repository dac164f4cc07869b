// Command sharedcq-echo is a server that serves many clients through one
// listener and one shared completion queue, and the client for it.
//
// The server makes a listener (client.Listen) and one completion queue
// (client.CreateCQ), accepts every connection request onto a fresh queue
// pair that completes into that CQ (QPOptions.CQ), and serves them all
// from one loop: poll the CQ, and when it is empty arm it (ReqNotify) and
// sleep in epoll on its descriptor (FD), then AckNotify: the verbs
// completion-channel pattern with one descriptor for every connection.
// Each completion names its queue pair (Completion.QPN), and so does each
// connection event: a client's going is its queue pair's terminal event.
//
// Messages are built with scatter-gather lists: a client SENDs an 8-byte
// header (the round) and its payload in three pieces from one WR (four
// entries); the server echoes a header of its own (how many it has
// echoed on that connection) and the payload, two entries from two
// buffers. Neither side copies them together.
//
//	sharedcq-echo                                  # server: prints its address and service
//	sharedcq-echo -connect ADDR -service N -conns 16
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/client"
)

type opts struct {
	socket  string
	connect string
	service uint
	n, size int
	conns   int // client: connections, each its own queue pair, served at once
	clients int // server: stop after this many connections ended (0: never)
}

func main() {
	var o opts
	flag.StringVar(&o.socket, "socket", client.DefaultSocket, "metaroced's control socket")
	flag.StringVar(&o.connect, "connect", "", "the server's address (client); empty: be the server")
	flag.UintVar(&o.service, "service", 0, "the server's listener (client)")
	flag.IntVar(&o.n, "n", 100, "round trips per connection (client)")
	flag.IntVar(&o.size, "s", 1024, "payload bytes per message")
	flag.IntVar(&o.conns, "conns", 1, "connections (client)")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	var err error
	if o.connect == "" {
		var st stats
		st, err = serve(ctx, o, func(addr netip.Addr, service uint32) {
			fmt.Printf("sharedcq-echo: run clients with -connect %s -service %d -s %d\n", addr, service, o.size)
		})
		fmt.Printf("sharedcq-echo: served %d connections, %d echoes, woken %d times through the CQ's descriptor\n",
			st.conns, st.echoes, st.wakes)
	} else {
		err = ping(ctx, o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharedcq-echo:", err)
		os.Exit(1)
	}
}

// hdr is the header each message starts with.
const hdr = 8

// conn is one client's queue pair and its part of the server's region:
// [in, in+hdr+size) receives, [out, out+hdr+size) holds the echo's
// header and payload (two buffers, sent as one message by an SGL).
type conn struct {
	q       *client.QP
	in, out int
	echoes  uint64
	// ready is closed once the accepting goroutine has done with the
	// queue pair (a queue pair is used by one goroutine at a time): the
	// serving loop waits for it before it touches one the first time.
	ready chan struct{}
	mine  bool
}

// stats is what a server did.
type stats struct {
	conns  int      // connections that ended
	echoes int      // messages echoed
	wakes  int      // epoll wake-ups on the CQ's descriptor
	qpns   []uint32 // the queue pairs it served, in the order they ended
}

// maxConns bounds the server's region (two message buffers each).
const maxConns = 1024

func serve(ctx context.Context, o opts, ready func(netip.Addr, uint32)) (stats, error) {
	var st stats
	c, err := client.Dial(o.socket)
	if err != nil {
		return st, err
	}
	defer c.Close()
	msg := hdr + o.size
	mem, err := client.Alloc(maxConns * 2 * msg)
	if err != nil {
		return st, err
	}
	mr, err := c.RegisterMemory(mem, 0, len(mem.Bytes()), client.LocalWrite)
	if err != nil {
		return st, err
	}
	// One CQ for every connection: room for each one's receive and echo.
	cq, err := c.CreateCQ(client.CQOptions{Slots: 4 * maxConns})
	if err != nil {
		return st, err
	}
	l, err := c.Listen(client.ListenOptions{Backlog: 256, Public: true})
	if err != nil {
		return st, err
	}
	defer l.Close()
	ready(l.Local, l.Service)

	// The queue pairs by number: the accepting goroutine adds each one
	// before accepting its connection, so its first entry finds it.
	var mu sync.Mutex
	byQPN := map[uint32]*conn{}
	acceptErr := make(chan error, 1)
	go func() {
		for i := 0; i < maxConns; i++ {
			r, err := l.GetRequest(ctx)
			if err != nil {
				acceptErr <- err
				return
			}
			q, err := c.CreateQP(client.QPOptions{CQ: cq, SQSlots: 8})
			if err != nil {
				acceptErr <- err
				return
			}
			k := &conn{q: q, in: 2 * i * msg, out: (2*i + 1) * msg, ready: make(chan struct{})}
			if err := q.PostRecv(0, mr, k.in, msg); err != nil {
				acceptErr <- err
				return
			}
			mu.Lock()
			byQPN[q.Num] = k
			mu.Unlock()
			if err := r.Accept(q, nil); err != nil {
				mu.Lock()
				delete(byQPN, q.Num)
				mu.Unlock()
				close(k.ready)
				q.Destroy()
				continue // the peer went meanwhile
			}
			// The server speaks first: the payload size it serves.
			binary.LittleEndian.PutUint64(mr.Bytes()[k.out:], uint64(o.size))
			_, err = q.Post(client.WR{Op: client.OpSend, Local: mr, LocalOff: k.out, Length: hdr, Unsignaled: true})
			close(k.ready)
			if err != nil {
				acceptErr <- err
				return
			}
		}
	}()

	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return st, err
	}
	defer unix.Close(ep)
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, cq.FD(), &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(cq.FD())}); err != nil {
		return st, err
	}
	var evs [1]unix.EpollEvent
	var wcs [64]client.Completion
	lookup := func(qpn uint32) *conn {
		mu.Lock()
		defer mu.Unlock()
		return byQPN[qpn]
	}
	for {
		n, err := cq.Poll(wcs[:])
		if err != nil {
			return st, err
		}
		for _, w := range wcs[:n] {
			k := lookup(w.QPN)
			if k == nil {
				return st, fmt.Errorf("an entry for queue pair %d, which is not one of ours", w.QPN)
			}
			if !k.mine {
				<-k.ready
				k.mine = true
			}
			switch {
			case w.Op == client.CompEvent:
				if w.Event == client.EventConnected {
					continue
				}
				// The client went: its queue pair is done.
				mu.Lock()
				delete(byQPN, w.QPN)
				mu.Unlock()
				k.q.Destroy()
				st.conns++
				st.qpns = append(st.qpns, w.QPN)
				if o.clients > 0 && st.conns == o.clients {
					return st, cq.Destroy()
				}
			case w.Err() != nil:
				// Flushed by the close whose event follows.
			case w.Op == client.CompRecv:
				if w.Bytes != msg {
					return st, fmt.Errorf("queue pair %d sent %d bytes, want %d", w.QPN, w.Bytes, msg)
				}
				k.echoes++
				b := mr.Bytes()
				copy(b[k.out+hdr:k.out+msg], b[k.in+hdr:k.in+msg])
				binary.LittleEndian.PutUint64(b[k.out:], k.echoes)
				if err := k.q.PostRecv(0, mr, k.in, msg); err != nil {
					return st, err
				}
				// Header and payload: two entries, one message.
				if _, err := k.q.Post(client.WR{Op: client.OpSend, Unsignaled: true, SGL: []client.SGE{
					{MR: mr, Off: k.out, Length: hdr}, {MR: mr, Off: k.out + hdr, Length: o.size}}}); err != nil {
					return st, err
				}
				st.echoes++
			}
		}
		if n > 0 {
			continue
		}
		select {
		case err := <-acceptErr:
			if ctx.Err() != nil {
				return st, nil
			}
			return st, err
		default:
		}
		if ctx.Err() != nil {
			return st, nil
		}
		armed, err := cq.ReqNotify()
		if err != nil {
			return st, err
		}
		if !armed {
			continue // entries came meanwhile
		}
		// Short: the context and the accepting goroutine are looked at
		// between waits.
		got, err := unix.EpollWait(ep, evs[:], 100)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return st, err
		}
		if got > 0 {
			st.wakes++
		}
		cq.AckNotify()
	}
}

func ping(ctx context.Context, o opts, out io.Writer) error {
	peer, err := netip.ParseAddr(o.connect)
	if err != nil {
		return err
	}
	c, err := client.Dial(o.socket)
	if err != nil {
		return err
	}
	defer c.Close()
	var wg sync.WaitGroup
	errs := make([]error, max(1, o.conns))
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pingOne(ctx, c, peer, o, i)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
	}
	fmt.Fprintf(out, "%d connections, %d echoes of %d bytes each, all verified\n", len(errs), o.n, o.size)
	return nil
}

// pingOne runs one connection: its own queue pair and region, the
// request gathered from four entries, the echo checked.
func pingOne(ctx context.Context, c *client.Client, peer netip.Addr, o opts, id int) error {
	msg := hdr + o.size
	mem, err := client.Alloc(2*msg + hdr)
	if err != nil {
		return err
	}
	defer mem.Close()
	mr, err := c.RegisterMemory(mem, 0, len(mem.Bytes()), client.LocalWrite)
	if err != nil {
		return err
	}
	defer mr.Deregister()
	// [0, hdr): the request's header; [hdr, hdr+size): its payload;
	// [back, back+msg): the echo.
	back := hdr + o.size + hdr
	q, err := c.CreateQP(client.QPOptions{})
	if err != nil {
		return err
	}
	defer q.Destroy()
	if err := q.PostRecv(0, mr, back, msg); err != nil {
		return err
	}
	if err := q.Connect(ctx, peer, uint32(o.service), 0); err != nil {
		return err
	}
	if _, err := next(ctx, q, client.CompRecv); err != nil {
		return fmt.Errorf("waiting for the server's hello: %w", err)
	}
	b := mr.Bytes()
	if size := int(binary.LittleEndian.Uint64(b[back:])); size != o.size {
		return fmt.Errorf("the server serves -s %d, this client -s %d", size, o.size)
	}
	third := o.size / 3
	sgl := []client.SGE{{MR: mr, Off: 0, Length: hdr}, {MR: mr, Off: hdr, Length: third},
		{MR: mr, Off: hdr + third, Length: third}, {MR: mr, Off: hdr + 2*third, Length: o.size - 2*third}}
	payload := b[hdr : hdr+o.size]
	for i := range o.n {
		binary.LittleEndian.PutUint64(b, uint64(i))
		for k := range payload {
			payload[k] = byte(i*13 + k + id)
		}
		if err := q.PostRecv(1, mr, back, msg); err != nil {
			return err
		}
		if _, err := q.Post(client.WR{Op: client.OpSend, WRID: 2, SGL: sgl}); err != nil {
			return err
		}
		w, err := next(ctx, q, client.CompRecv)
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		if w.Bytes != msg || binary.LittleEndian.Uint64(b[back:]) != uint64(i+1) || string(b[back+hdr:back+msg]) != string(payload) {
			return fmt.Errorf("round %d: the echo differs", i)
		}
	}
	return nil
}

// next waits for a completion of op, failing on any error completion.
func next(ctx context.Context, q *client.QP, op client.CompletionOp) (client.Completion, error) {
	var cq [1]client.Completion
	for {
		if _, err := q.WaitCQ(ctx, cq[:]); err != nil {
			return cq[0], err
		}
		if err := cq[0].Err(); err != nil {
			return cq[0], fmt.Errorf("%s %d: %w", cq[0].Op, cq[0].WRID, err)
		}
		if cq[0].Op == op {
			return cq[0], nil
		}
	}
}
