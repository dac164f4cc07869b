// Command sendrecv-echo is a SEND/RECV echo through metaroced: the server
// sends every message it receives straight back, the client sends
// numbered messages, checks each echo byte for byte and prints the round
// trips. Start the server; it prints the flags the client needs:
//
//	sendrecv-echo -socket /run/metaroced/control.sock
//	sendrecv-echo -socket ... -connect 10.0.0.2 -qpn 123456 -token 0x... -n 1000 -s 4096
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
	n, size int
}

func main() {
	var o opts
	flag.StringVar(&o.socket, "socket", client.DefaultSocket, "metaroced's control socket")
	flag.StringVar(&o.connect, "connect", "", "the server's address (client); empty: be the server")
	flag.UintVar(&o.qpn, "qpn", 0, "the server's queue pair (client)")
	flag.Uint64Var(&o.token, "token", 0, "the server's queue pair token (client; it prints it)")
	flag.IntVar(&o.n, "n", 1000, "messages")
	flag.IntVar(&o.size, "s", 4096, "bytes per message (at least 8)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	if o.connect == "" {
		err = serve(ctx, o, func(addr netip.Addr, qpn uint32, token uint64) {
			fmt.Printf("echo server: run the client with -connect %s -qpn %d -token %#x\n", addr, qpn, token)
		})
	} else {
		err = ping(ctx, o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sendrecv-echo:", err)
		os.Exit(1)
	}
}

// setup opens a session with one queue pair and a registered buffer.
func setup(o opts, access client.Access) (*client.Client, *client.QP, *client.MR, error) {
	if o.size < 8 || o.n <= 0 {
		return nil, nil, nil, errors.New("-s at least 8, -n positive")
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
	mr, err := c.RegisterMemory(m, 0, 2*o.size, access)
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

// serve echoes o.n messages of up to o.size bytes.
func serve(ctx context.Context, o opts, ready func(netip.Addr, uint32, uint64)) error {
	c, q, mr, err := setup(o, client.LocalWrite)
	if err != nil {
		return err
	}
	defer c.Close()
	// The first receive is posted before the peer can connect, as with
	// verbs: a SEND that finds none is refused (RNR) and retried only so
	// long. (The engine takes it from the send queue once connected.)
	if err := q.PostRecv(0, mr, 0, o.size); err != nil {
		return err
	}
	ready(q.Local, q.Num, q.Token)
	if _, err := q.Accept(ctx); err != nil {
		return err
	}
	var cq [2]client.Completion
	for i := range o.n {
		got := -1
		for got < 0 {
			n, err := q.WaitCQ(ctx, cq[:])
			if err != nil {
				return err
			}
			for _, x := range cq[:n] {
				if err := x.Err(); err != nil {
					return fmt.Errorf("%s: %w", x.Op, err)
				}
				if x.Op == client.CompRecv {
					got = x.Bytes
				}
			}
		}
		// The receive buffer is free again only after the SEND of its
		// bytes completes: copy to the second half and send from there.
		copy(mr.Bytes()[o.size:], mr.Bytes()[:got])
		if i+1 < o.n { // the next message comes only after this echo
			if err := q.PostRecv(uint64(i+1), mr, 0, o.size); err != nil {
				return err
			}
		}
		if err := q.PostSend(uint64(i), mr, o.size, got); err != nil {
			return err
		}
	}
	return drainSends(ctx, q, 1)
}

// drainSends waits for the last n SEND completions.
func drainSends(ctx context.Context, q *client.QP, n int) error {
	var cq [4]client.Completion
	for n > 0 {
		k, err := q.WaitCQ(ctx, cq[:])
		if err != nil {
			return err
		}
		for _, x := range cq[:k] {
			if err := x.Err(); err != nil {
				return fmt.Errorf("%s: %w", x.Op, err)
			}
			if x.Op == client.CompSend {
				n--
			}
		}
	}
	return nil
}

// ping sends o.n numbered messages and checks each echo.
func ping(ctx context.Context, o opts, out io.Writer) error {
	peer, err := netip.ParseAddr(o.connect)
	if err != nil {
		return err
	}
	c, q, mr, err := setup(o, client.LocalWrite)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := q.Connect(ctx, peer, uint32(o.qpn), o.token); err != nil {
		return err
	}
	msg, echo := mr.Bytes()[:o.size], mr.Bytes()[o.size:]
	rtt := make([]time.Duration, 0, o.n)
	var cq [2]client.Completion
	for i := range o.n {
		for k := range msg {
			msg[k] = byte(i + k)
		}
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if err := q.PostRecv(uint64(i), mr, o.size, o.size); err != nil {
			return err
		}
		t0 := time.Now()
		if err := q.PostSend(uint64(i), mr, 0, o.size); err != nil {
			return err
		}
		sent, got := false, false
		for !sent || !got {
			n, err := q.WaitCQ(ctx, cq[:])
			if err != nil {
				return err
			}
			for _, x := range cq[:n] {
				if err := x.Err(); err != nil {
					return fmt.Errorf("%s %d: %w", x.Op, x.WRID, err)
				}
				sent = sent || x.Op == client.CompSend
				if x.Op == client.CompRecv {
					if x.Bytes != o.size {
						return fmt.Errorf("echo %d: %d bytes, want %d", i, x.Bytes, o.size)
					}
					got = true
				}
			}
		}
		rtt = append(rtt, time.Since(t0))
		if string(echo) != string(msg) {
			return fmt.Errorf("echo %d differs from the message", i)
		}
	}
	slices.Sort(rtt)
	fmt.Fprintf(out, "%d echoes of %d bytes, all verified; round trip p50 %v, p99 %v\n", o.n, o.size,
		rtt[len(rtt)/2], rtt[len(rtt)*99/100])
	return nil
}
