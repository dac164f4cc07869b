package demo

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/metaroce/metaroce/client"
)

// The incast demo's metaroce traffic, with the demo process as the
// application on every host: a client session on each daemon, one queue
// pair per sender connected to its own queue pair on the receiver, and a
// slot of the receiver's region per sender. A round fills every sender's
// block with bytes drawn from (round, sender), zeroes the receiver's
// slots, then releases all senders at once: each posts one WRITE with
// immediate of its block into its slot. A sender's completion time is from
// the release to its WRITE's completion (the receiver's ack of the last
// byte); when the immediate arrives the receiving side compares the slot
// with the block, so a lost, misplaced or stale byte shows.

// incastFlows is the connected queue pairs and their memory.
type incastFlows struct {
	recv    *client.Client
	slots   *client.MR // the receiver's: one message per sender
	senders []incastSender
	mems    []*client.Memory
	size    int
}

type incastSender struct {
	c     *client.Client
	block *client.MR
	qp    *client.QP // on the sender
	rqp   *client.QP // its peer on the receiver
}

// openIncastFlows connects a queue pair on each daemon at senderSocks to
// one on the daemon at recvSock, whose engine answers at peer.
func openIncastFlows(ctx context.Context, recvSock string, senderSocks []string, peer netip.Addr, size int) (_ *incastFlows, err error) {
	f := &incastFlows{size: size}
	defer func() {
		if err != nil {
			f.close() // f, not the result: that is nil on every error return
		}
	}()
	if f.recv, err = client.Dial(recvSock); err != nil {
		return nil, err
	}
	if f.slots, err = f.register(f.recv, len(senderSocks)*size, client.LocalWrite|client.RemoteWrite); err != nil {
		return nil, err
	}
	qo := client.QPOptions{SQSlots: 8, CQSlots: 8}
	for _, sock := range senderSocks {
		var s incastSender
		if s.c, err = client.Dial(sock); err != nil {
			return nil, err
		}
		f.senders = append(f.senders, s)
		sp := &f.senders[len(f.senders)-1]
		if sp.block, err = f.register(sp.c, size, client.LocalWrite); err != nil {
			return nil, err
		}
		if sp.qp, err = sp.c.CreateQP(qo); err != nil {
			return nil, err
		}
		if sp.rqp, err = f.recv.CreateQP(qo); err != nil {
			return nil, err
		}
		// Generous: on a loaded machine a daemon may take seconds.
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		acc := make(chan error, 1)
		go func() { _, err := sp.rqp.Accept(cctx); acc <- err }()
		err = sp.qp.Connect(cctx, peer, sp.rqp.Num, sp.rqp.Token)
		if aerr := <-acc; err == nil {
			err = aerr
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("connect sender %d's queue pair: %w", len(f.senders)-1, err)
		}
	}
	return f, nil
}

func (f *incastFlows) register(c *client.Client, n int, access client.Access) (*client.MR, error) {
	m, err := client.Alloc(n)
	if err != nil {
		return nil, err
	}
	f.mems = append(f.mems, m)
	return c.RegisterMemory(m, 0, n, access)
}

// close ends every session (the daemons free the queue pairs and regions)
// and unmaps the memory.
func (f *incastFlows) close() {
	for _, s := range f.senders {
		if s.c != nil {
			s.c.Close()
		}
	}
	if f.recv != nil {
		f.recv.Close()
	}
	for _, m := range f.mems {
		m.Close()
	}
}

// roundResult is one incast round: per sender, its completion time and
// what went wrong.
type roundResult struct {
	FCT      []time.Duration // 0 where the WRITE failed
	Verified int             // messages whose slot held the block
	Failed   int             // WRITEs completed in error or not at all
	Corrupt  int             // messages whose slot did not hold the block
	Err      error
}

// fillBlock writes the pseudo-random bytes of (round, sender) into b.
func fillBlock(b []byte, round, sender int) {
	seed := uint64(round)<<32 | uint64(sender)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
}

// round runs one incast round (see the file's comment).
func (f *incastFlows) round(ctx context.Context, round int) roundResult {
	n := len(f.senders)
	res := roundResult{FCT: make([]time.Duration, n)}
	for i := range f.senders {
		fillBlock(f.senders[i].block.Bytes(), round, i)
	}
	clear(f.slots.Bytes())
	var wg, rwg sync.WaitGroup // senders, receiving queue pairs
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	var mu sync.Mutex
	release := make(chan struct{})
	var t0 time.Time
	fail := func(err error) {
		mu.Lock()
		res.Failed++
		if res.Err == nil {
			res.Err = err
		}
		mu.Unlock()
	}
	for i := range f.senders {
		s := &f.senders[i]
		wg.Add(1)
		rwg.Add(1)
		go func() { // the sender
			defer wg.Done()
			<-release
			err := s.qp.PostWriteImm(uint64(round), s.block, 0, f.size, f.slots.Addr+uint64(i*f.size), f.slots.Key, uint32(round))
			if err != nil {
				fail(fmt.Errorf("sender %d: post: %w", i, err))
				return
			}
			var cq [1]client.Completion
			k, err := s.qp.WaitCQ(ctx, cq[:])
			end := time.Now()
			switch {
			case err != nil:
				fail(fmt.Errorf("sender %d: %w", i, err))
			case k != 1:
				fail(fmt.Errorf("sender %d: %d completions", i, k))
			case cq[0].Err() != nil:
				fail(fmt.Errorf("sender %d: WRITE: %w", i, cq[0].Err()))
			default:
				mu.Lock()
				res.FCT[i] = end.Sub(t0)
				mu.Unlock()
			}
		}()
		go func() { // its receiving queue pair
			defer rwg.Done()
			var cq [1]client.Completion
			for {
				k, err := s.rqp.WaitCQ(rctx, cq[:])
				if err != nil {
					return // the sender's side reports the failure
				}
				if k == 0 || cq[0].Op != client.CompRecvWriteImm {
					continue
				}
				ok := cq[0].Err() == nil && cq[0].Imm == uint32(round) && cq[0].Bytes == f.size &&
					bytes.Equal(f.slots.Bytes()[i*f.size:(i+1)*f.size], s.block.Bytes())
				mu.Lock()
				if ok {
					res.Verified++
				} else {
					res.Corrupt++
				}
				mu.Unlock()
				return
			}
		}()
	}
	t0 = time.Now()
	close(release)
	wg.Wait()
	// A completed WRITE's immediate is on its way; a failed one's never
	// comes, so the receiving side is given a bound.
	rdone := make(chan struct{})
	go func() { rwg.Wait(); close(rdone) }()
	select {
	case <-rdone:
	case <-time.After(5 * time.Second):
		rcancel()
		<-rdone
	}
	if missing := n - res.Failed - res.Verified - res.Corrupt; missing > 0 && res.Err == nil {
		res.Err = fmt.Errorf("%d completed WRITEs whose immediate never arrived", missing)
		res.Corrupt += missing
	}
	if res.Err == nil && res.Corrupt > 0 {
		res.Err = errors.New("data corrupt")
	}
	return res
}
