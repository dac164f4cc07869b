// Command listen-echo is a server that serves many clients through one
// listener and one goroutine, and the client for it.
//
// The server makes a listener (client.Listen), accepts every connection
// request onto a fresh queue pair, and serves all of them from one loop
// that waits on an epoll set of the queue pairs' descriptors (ReqNotify,
// FD, AckNotify): the verbs completion-channel pattern, without a
// goroutine per peer. The server speaks first (a SEND of the message
// size it serves), since what a client sends before its connection is
// accepted is not reported; then each client's SENDs are echoed back.
// A client whose peer goes away sees it as an error, not a hang: its
// waits end with ErrPeerClosed (or ErrRetryExceeded once the keepalive
// gives up on a vanished host).
//
//	listen-echo                       # server: prints its address and service
//	listen-echo -connect ADDR -service N
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

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/client"
)

type opts struct {
	socket  string
	connect string
	service uint
	n, size int
	clients int // server: stop after serving this many (0: never)
}

func main() {
	var o opts
	flag.StringVar(&o.socket, "socket", client.DefaultSocket, "metaroced's control socket")
	flag.StringVar(&o.connect, "connect", "", "the server's address (client); empty: be the server")
	flag.UintVar(&o.service, "service", 0, "the server's listener (client)")
	flag.IntVar(&o.n, "n", 100, "round trips (client)")
	flag.IntVar(&o.size, "s", 1024, "bytes per message")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	var err error
	if o.connect == "" {
		err = serve(ctx, o, func(addr netip.Addr, service uint32) {
			fmt.Printf("listen-echo: run clients with -connect %s -service %d -s %d\n", addr, service, o.size)
		})
	} else {
		err = ping(ctx, o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen-echo:", err)
		os.Exit(1)
	}
}

// conn is one client's queue pair and its half of the server's region:
// [in, in+size) receives, [out, out+size) is echoed from.
type conn struct {
	q       *client.QP
	in, out int
	served  int
}

// maxConns bounds the server's region (two message buffers each).
const maxConns = 1024

func serve(ctx context.Context, o opts, ready func(netip.Addr, uint32)) error {
	c, err := client.Dial(o.socket)
	if err != nil {
		return err
	}
	defer c.Close()
	mem, err := client.Alloc(maxConns * 2 * o.size)
	if err != nil {
		return err
	}
	mr, err := c.RegisterMemory(mem, 0, len(mem.Bytes()), client.LocalWrite)
	if err != nil {
		return err
	}
	// Public: clients need only the service number, as a TCP server's
	// clients need only its port (docs/api.md, Listeners).
	l, err := c.Listen(client.ListenOptions{Backlog: 256, Public: true})
	if err != nil {
		return err
	}
	defer l.Close()
	ready(l.Local, l.Service)

	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(ep)
	// Accepting runs beside the serving loop and hands each new queue
	// pair over, ready: its receive posted, its hello sent.
	fresh := make(chan *conn, 16)
	acceptErr := make(chan error, 1)
	go func() {
		for i := 0; i < maxConns; i++ {
			r, err := l.GetRequest(ctx)
			if err != nil {
				acceptErr <- err
				return
			}
			q, err := c.CreateQP(client.QPOptions{})
			if err != nil {
				acceptErr <- err
				return
			}
			k := &conn{q: q, in: 2 * i * o.size, out: (2*i + 1) * o.size}
			if err := q.PostRecv(0, mr, k.in, o.size); err != nil {
				acceptErr <- err
				return
			}
			if err := r.Accept(q, nil); err != nil {
				q.Destroy()
				continue // the peer went meanwhile
			}
			binary.LittleEndian.PutUint32(mr.Bytes()[k.out:], uint32(o.size))
			if _, err := q.Post(client.WR{Op: client.OpSend, Local: mr, LocalOff: k.out, Length: 4, Unsignaled: true}); err != nil {
				acceptErr <- err
				return
			}
			fresh <- k
		}
	}()

	byFD := map[int32]*conn{}
	finished := 0
	var evs [64]unix.EpollEvent
	var cq [16]client.Completion
	// drain serves what k's completion queue holds and re-arms it; it
	// reports false once k's connection is over.
	drain := func(k *conn) (bool, error) {
		for {
			n, err := k.q.PollCQ(cq[:])
			if err != nil {
				return false, err
			}
			for _, cmp := range cq[:n] {
				if cmp.Err() != nil {
					return false, nil // flushed or failed: the connection is over
				}
				if cmp.Op != client.CompRecv {
					continue
				}
				copy(mr.Bytes()[k.out:k.out+cmp.Bytes], mr.Bytes()[k.in:k.in+cmp.Bytes])
				k.served++
				if err := k.q.PostRecv(0, mr, k.in, o.size); err != nil {
					return false, err
				}
				if _, err := k.q.Post(client.WR{Op: client.OpSend, Local: mr, LocalOff: k.out, Length: cmp.Bytes, Unsignaled: true}); err != nil {
					return false, err
				}
			}
			if e, ok := k.q.PollEvent(); ok && e.Terminal() {
				return false, nil
			}
			if n > 0 {
				continue
			}
			armed, err := k.q.ReqNotify()
			if err != nil {
				return false, err
			}
			if armed {
				return true, nil
			}
		}
	}
	for {
		select {
		case k := <-fresh:
			if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, k.q.FD(), &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(k.q.FD())}); err != nil {
				return err
			}
			byFD[int32(k.q.FD())] = k
			if _, err := drain(k); err != nil {
				return err
			}
			continue
		case err := <-acceptErr:
			if ctx.Err() != nil {
				return nil
			}
			return err
		default:
		}
		n, err := unix.EpollWait(ep, evs[:], 50) // short: new queue pairs join between waits
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		for _, ev := range evs[:max(n, 0)] {
			k := byFD[ev.Fd]
			k.q.AckNotify()
			live, err := drain(k)
			if err != nil {
				return err
			}
			if !live {
				unix.EpollCtl(ep, unix.EPOLL_CTL_DEL, k.q.FD(), nil)
				delete(byFD, ev.Fd)
				k.q.Destroy()
				finished++
				if o.clients > 0 && finished == o.clients {
					return nil
				}
			}
		}
		if ctx.Err() != nil {
			return nil
		}
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
	mem, err := client.Alloc(2 * o.size)
	if err != nil {
		return err
	}
	mr, err := c.RegisterMemory(mem, 0, len(mem.Bytes()), client.LocalWrite)
	if err != nil {
		return err
	}
	q, err := c.CreateQP(client.QPOptions{})
	if err != nil {
		return err
	}
	if err := q.PostRecv(0, mr, o.size, o.size); err != nil {
		return err
	}
	if err := q.Connect(ctx, peer, uint32(o.service), 0); err != nil {
		return err
	}
	if _, err := next(ctx, q, client.CompRecv); err != nil {
		return fmt.Errorf("waiting for the server's hello: %w", err)
	}
	if size := int(binary.LittleEndian.Uint32(mr.Bytes()[o.size:])); size != o.size {
		return fmt.Errorf("the server serves -s %d, this client -s %d", size, o.size)
	}
	msg, back := mr.Bytes()[:o.size], mr.Bytes()[o.size:]
	for i := range o.n {
		for k := range msg {
			msg[k] = byte(i*13 + k)
		}
		if err := q.PostRecv(1, mr, o.size, o.size); err != nil {
			return err
		}
		if err := q.PostSend(2, mr, 0, o.size); err != nil {
			return err
		}
		c, err := next(ctx, q, client.CompRecv)
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		if c.Bytes != o.size || string(back) != string(msg) {
			return fmt.Errorf("round %d: the echo differs", i)
		}
	}
	fmt.Fprintf(out, "%d echoes of %d bytes, all verified\n", o.n, o.size)
	return q.Destroy()
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
