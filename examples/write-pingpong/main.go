// Command write-pingpong bounces a buffer between two hosts with RDMA
// WRITE with immediate through metaroced: the client writes into the
// server's memory, the server writes the same bytes back into the
// client's, and the client checks them and prints the round trips. The
// client tells the server where to write with one SEND (its address and
// key), so only the server's queue pair number, address and key travel
// out of band. Start the server; it prints the flags the client needs:
//
//	write-pingpong -socket /run/metaroced/control.sock
//	write-pingpong -socket ... -connect 10.0.0.2 -qpn 123 -token 0x... -rkey 0xabc -raddr 0x7f00... -n 1000 -s 65536
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
	"slices"
	"time"

	"github.com/metaroce/metaroce/client"
)

type opts struct {
	socket  string
	connect string
	qpn     uint
	token   uint64
	rkey    uint
	raddr   uint64
	n, size int
}

// where is what the server prints and the client's SEND carries.
type where struct {
	addr  netip.Addr
	qpn   uint32
	token uint64
	rkey  uint32
	raddr uint64
}

func main() {
	var o opts
	flag.StringVar(&o.socket, "socket", client.DefaultSocket, "metaroced's control socket")
	flag.StringVar(&o.connect, "connect", "", "the server's address (client); empty: be the server")
	flag.UintVar(&o.qpn, "qpn", 0, "the server's queue pair (client)")
	flag.Uint64Var(&o.token, "token", 0, "the server's queue pair token (client; it prints it)")
	flag.UintVar(&o.rkey, "rkey", 0, "the server's region key (client)")
	flag.Uint64Var(&o.raddr, "raddr", 0, "the server's region address (client)")
	flag.IntVar(&o.n, "n", 1000, "round trips")
	flag.IntVar(&o.size, "s", 65536, "bytes per WRITE")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	if o.connect == "" {
		err = serve(ctx, o, func(w where) {
			fmt.Printf("pingpong server: run the client with -connect %s -qpn %d -token %#x -rkey %#x -raddr %#x\n", w.addr, w.qpn, w.token, w.rkey, w.raddr)
		})
	} else {
		err = ping(ctx, o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "write-pingpong:", err)
		os.Exit(1)
	}
}

func setup(o opts) (*client.Client, *client.QP, *client.MR, error) {
	if o.size < 16 || o.n <= 0 {
		return nil, nil, nil, errors.New("-s at least 16, -n positive")
	}
	c, err := client.Dial(o.socket)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := client.Alloc(2 * o.size)
	if err != nil {
		c.Close()
		return nil, nil, nil, err
	}
	mr, err := c.RegisterMemory(m, 0, 2*o.size, client.LocalWrite|client.RemoteWrite)
	if err != nil {
		c.Close()
		return nil, nil, nil, err
	}
	q, err := c.CreateQP(client.QPOptions{})
	if err != nil {
		c.Close()
		return nil, nil, nil, err
	}
	return c, q, mr, nil
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

func serve(ctx context.Context, o opts, ready func(where)) error {
	c, q, mr, err := setup(o)
	if err != nil {
		return err
	}
	defer c.Close()
	// The client's SEND (its address and key) lands in the second half.
	if err := q.PostRecv(0, mr, o.size, 16); err != nil {
		return err
	}
	ready(where{addr: q.Local, qpn: q.Num, token: q.Token, rkey: mr.Key, raddr: mr.Addr})
	if _, err := q.Accept(ctx); err != nil {
		return err
	}
	if _, err := next(ctx, q, client.CompRecv); err != nil {
		return err
	}
	hello := mr.Bytes()[o.size : o.size+16]
	raddr, rkey := binary.LittleEndian.Uint64(hello), binary.LittleEndian.Uint32(hello[8:])
	if size := int(binary.LittleEndian.Uint32(hello[12:])); size != o.size {
		// Closing the session tells the client (its wait ends with
		// ErrPeerClosed) instead of leaving it to its context.
		return fmt.Errorf("the client writes %d bytes, this server -s %d", size, o.size)
	}
	for i := range o.n {
		c, err := next(ctx, q, client.CompRecvWriteImm)
		if err != nil {
			return err
		}
		if c.Imm != uint32(i) || c.Bytes != o.size {
			return fmt.Errorf("write %d: imm %d, %d bytes", i, c.Imm, c.Bytes)
		}
		// Back from the first half, where the client's bytes landed, to
		// the client's second half.
		if err := q.PostWriteImm(uint64(i), mr, 0, o.size, raddr+uint64(o.size), rkey, uint32(i)); err != nil {
			return err
		}
		if _, err := next(ctx, q, client.CompWrite); err != nil {
			return err
		}
	}
	return nil
}

func ping(ctx context.Context, o opts, out io.Writer) error {
	peer, err := netip.ParseAddr(o.connect)
	if err != nil {
		return err
	}
	c, q, mr, err := setup(o)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := q.Connect(ctx, peer, uint32(o.qpn), o.token); err != nil {
		return err
	}
	hello := mr.Bytes()[:16]
	binary.LittleEndian.PutUint64(hello, mr.Addr)
	binary.LittleEndian.PutUint32(hello[8:], mr.Key)
	binary.LittleEndian.PutUint32(hello[12:], uint32(o.size))
	if err := q.PostSend(0, mr, 0, 16); err != nil {
		return err
	}
	if _, err := next(ctx, q, client.CompSend); err != nil {
		return err
	}
	out1, back := mr.Bytes()[:o.size], mr.Bytes()[o.size:]
	rtt := make([]time.Duration, 0, o.n)
	for i := range o.n {
		for k := range out1 {
			out1[k] = byte(i*7 + k)
		}
		t0 := time.Now()
		if err := q.PostWriteImm(uint64(i), mr, 0, o.size, o.raddr, uint32(o.rkey), uint32(i)); err != nil {
			return err
		}
		c, err := next(ctx, q, client.CompRecvWriteImm)
		if err != nil {
			// A flushed request or the wait itself: say how the
			// connection ended if it did.
			if e, ok := ended(ctx, q); ok {
				return fmt.Errorf("round %d: the server closed the connection (does it run with -s %d?): %w", i, o.size, e.Err())
			}
			return err
		}
		rtt = append(rtt, time.Since(t0))
		if c.Imm != uint32(i) || string(back) != string(out1) {
			return fmt.Errorf("round %d: the bytes that came back differ", i)
		}
	}
	slices.Sort(rtt)
	fmt.Fprintf(out, "%d round trips of %d bytes, all verified; p50 %v, p99 %v\n", o.n, o.size,
		rtt[len(rtt)/2], rtt[len(rtt)*99/100])
	return nil
}

// ended waits briefly for q's terminal event: after a flushed
// completion it follows at once.
func ended(ctx context.Context, q *client.QP) (client.Event, bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for {
		e, err := q.WaitEvent(ctx)
		if err != nil {
			return e, false
		}
		if e.Terminal() {
			return e, true
		}
	}
}
