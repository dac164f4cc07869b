package demo

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/metaroce/metaroce/client"
)

// The leaf-spine demo's metaroce traffic, with the demo process as the
// application on both hosts: a client session on each daemon's control
// socket (a Unix socket path, reachable from any namespace), registered
// memory and a queue pair on each, the two queue pairs connected across
// the fabric. Holding both ends lets the demo check every message as it
// arrives and count verified bytes while the run goes on, which is what
// the goodput samples around the cut are made of.
//
// Message i is a slice of a pseudo-random block at an offset derived from
// i, sent as a WRITE with immediate i into slot i mod flowSlots of the
// receiver's region; when the immediate arrives the receiving side
// compares the slot with the block, so a lost, misplaced, stale or
// duplicated message shows without generating bytes per message. A slot
// is written again only after its message was checked: the receiving side
// hands slots back to the writer.

// Shape of the flow: 16 messages in flight over 4 streams, as the runs
// this demo has always measured; a block span of 1 MiB gives each message
// of a run an offset far from its neighbours'.
const (
	flowSlots   = 16
	flowStreams = 4
	flowSpan    = 1 << 20
)

// cutFlow is the connected pair of queue pairs and their memory.
type cutFlow struct {
	ca, cb *client.Client
	mems   []*client.Memory
	block  *client.MR // the writer's: the pseudo-random block
	slots  *client.MR // the receiver's: flowSlots messages
	qa, qb *client.QP
	size   int
	// verified is the bytes of the current run's messages checked so
	// far: the receiving goroutine adds, the sampling loop reads.
	verified atomic.Int64
}

// flowResult is one run of a cutFlow.
type flowResult struct {
	Completed, Failed             int // the writer's completions
	Verified, Corrupt, Duplicates int // what the receiving side found
	Bytes                         int64
	End                           time.Time // the writer's last completion
	Err                           error
}

// openCutFlow connects a queue pair on the daemon at sockA to one on the
// daemon at sockB, whose engine answers at peer.
func openCutFlow(ctx context.Context, sockA, sockB string, peer netip.Addr, size int) (f *cutFlow, err error) {
	f = &cutFlow{size: size}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	if f.ca, err = client.Dial(sockA); err != nil {
		return nil, err
	}
	if f.cb, err = client.Dial(sockB); err != nil {
		return nil, err
	}
	if f.block, err = f.register(f.ca, flowSpan+size, client.LocalWrite); err != nil {
		return nil, err
	}
	if f.slots, err = f.register(f.cb, flowSlots*size, client.LocalWrite|client.RemoteWrite); err != nil {
		return nil, err
	}
	// Room for every message in flight, so neither queue ever fills.
	qo := client.QPOptions{SQSlots: 4 * flowSlots, CQSlots: 4 * flowSlots}
	if f.qa, err = f.ca.CreateQP(qo); err != nil {
		return nil, err
	}
	if f.qb, err = f.cb.CreateQP(qo); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	acc := make(chan error, 1)
	go func() { _, err := f.qb.Accept(cctx); acc <- err }()
	err = f.qa.Connect(cctx, peer, f.qb.Num, f.qb.Token)
	if aerr := <-acc; err == nil {
		err = aerr
	}
	if err != nil {
		return nil, fmt.Errorf("connect the queue pairs: %w", err)
	}
	return f, nil
}

func (f *cutFlow) register(c *client.Client, n int, access client.Access) (*client.MR, error) {
	m, err := client.Alloc(n)
	if err != nil {
		return nil, err
	}
	f.mems = append(f.mems, m)
	return c.RegisterMemory(m, 0, n, access)
}

// close ends both sessions (the daemons free their queue pairs and
// regions) and unmaps the memory.
func (f *cutFlow) close() {
	for _, c := range []*client.Client{f.ca, f.cb} {
		if c != nil {
			c.Close()
		}
	}
	for _, m := range f.mems {
		m.Close()
	}
}

// message is message i's offset in the block.
func (f *cutFlow) message(i int) int {
	return int((uint64(i)*2654435761 + 17) % flowSpan)
}

// run writes n messages, checks each on arrival, and returns when every
// one has been completed and checked, or ctx ends.
func (f *cutFlow) run(ctx context.Context, n int, seed uint64) flowResult {
	r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	b := f.block.Bytes()
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	f.verified.Store(0)
	var res, got flowResult
	free := make(chan int, flowSlots) // never full: a slot is handed back once per message
	vctx, vcancel := context.WithCancel(ctx)
	defer vcancel()
	checked := make(chan struct{})
	go func() {
		f.check(vctx, n, free, &got)
		close(checked)
	}()
	res = f.write(ctx, n, free)
	// Every completed WRITE's immediate is on its way to the receiving
	// queue pair's completion queue; a failed one's never comes.
	select {
	case <-checked:
	case <-time.After(10 * time.Second):
		vcancel()
		<-checked
	}
	res.Verified, res.Corrupt, res.Duplicates, res.Bytes = got.Verified, got.Corrupt, got.Duplicates, got.Bytes
	if res.Err == nil && got.Err != nil && ctx.Err() == nil {
		res.Err = got.Err
	}
	return res
}

// write posts the messages, each into its slot once the receiving side
// has handed the slot back, and counts the completions. It owns qa.
func (f *cutFlow) write(ctx context.Context, n int, free <-chan int) flowResult {
	var res flowResult
	busy := make([]bool, flowSlots)
	var cq [flowSlots]client.Completion
	// While every slot waits for its check, a failed WRITE (which frees
	// nothing) is noticed on this tick.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for next, done := 0, 0; done < n; {
		for drained := false; !drained; {
			select {
			case i := <-free:
				busy[i%flowSlots] = false
			default:
				drained = true
			}
		}
		for next < n && !busy[next%flowSlots] {
			slot := next % flowSlots
			_, err := f.qa.Post(client.WR{Op: client.OpWriteImm, WRID: uint64(next), Stream: uint16(next % flowStreams),
				Local: f.block, LocalOff: f.message(next), Length: f.size,
				RemoteAddr: f.slots.Addr + uint64(slot*f.size), RemoteKey: f.slots.Key, Imm: uint32(next)})
			if errors.Is(err, client.ErrSQFull) {
				break
			}
			if err != nil {
				res.Err = err
				return res
			}
			busy[slot] = true
			next++
		}
		k, err := f.qa.PollCQ(cq[:])
		if err != nil {
			res.Err = err
			return res
		}
		for _, c := range cq[:k] {
			done++
			if err := c.Err(); err != nil {
				res.Failed++
				busy[c.WRID%flowSlots] = false // lost: its check never comes
				if res.Err == nil {
					res.Err = fmt.Errorf("WRITE %d: %w", c.WRID, err)
				}
				continue
			}
			res.Completed++
		}
		if k > 0 {
			res.End = time.Now()
			continue
		}
		select {
		case i := <-free:
			busy[i%flowSlots] = false
		case <-tick.C:
		case <-ctx.Done():
			res.Err = ctx.Err()
			return res
		}
	}
	return res
}

// check takes the receiving queue pair's completions and checks each
// message's slot against the block, handing the slot back, until n
// messages were seen or ctx ends. It owns qb.
func (f *cutFlow) check(ctx context.Context, n int, free chan<- int, res *flowResult) {
	seen := make([]bool, n)
	var cq [flowSlots]client.Completion
	for first := 0; first < n; {
		k, err := f.qb.WaitCQ(ctx, cq[:])
		if err != nil {
			res.Err = err
			return
		}
		for _, c := range cq[:k] {
			i := int(c.Imm)
			switch {
			case c.Op != client.CompRecvWriteImm:
			case c.Err() != nil || i >= n:
				res.Corrupt++ // no message to hand back
			case seen[i]:
				res.Duplicates++ // its slot was handed back the first time
			default:
				seen[i] = true
				first++
				off, slot := f.message(i), i%flowSlots
				if c.Bytes == f.size && bytes.Equal(f.slots.Bytes()[slot*f.size:(slot+1)*f.size], f.block.Bytes()[off:off+f.size]) {
					res.Verified++
					res.Bytes += int64(f.size)
					f.verified.Add(int64(f.size))
				} else {
					res.Corrupt++
				}
				free <- i
			}
		}
	}
}
