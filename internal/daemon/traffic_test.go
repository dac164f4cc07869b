package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/internal/apptest"
)

// The tests make traffic as applications do: a client session on each
// daemon's control socket, a registered region on each side, a queue
// pair on each connected to the other, WRITEs posted on one side.

// Shape of writeVerified's traffic: writeDepth WRITEs in flight over
// writeStreams streams (the load the daemons' tests have always put on
// them), and a receiving region of at most verifyRegion bytes, reused
// round after round.
const (
	writeDepth   = 16
	writeStreams = 4
	verifyRegion = 16 << 20
)

// writeFlow is what writeVerified leaves connected: the queue pairs stay
// up until the test ends, so telemetry can still see their connection.
type writeFlow struct {
	qa, qb  *client.QP
	elapsed time.Duration // from the first post to the last completion
}

// writeVerified moves `messages` WRITEs of `size` bytes from a queue pair
// on the daemon at sockA to one on the daemon at sockB, whose engine
// answers at peer, both queue pairs on the given engine index of their
// daemon. The receiving region holds a round of messages; each round
// sends fresh random bytes and is compared with the receiver's memory once
// its WRITEs have completed, so a message lost, misplaced or placed twice
// from an earlier round shows: every byte of every message is checked.
func writeVerified(t *testing.T, ctx context.Context, sockA, sockB string, peer netip.Addr, engine, messages, size int) writeFlow {
	t.Helper()
	ca, cb := apptest.Dial(t, sockA), apptest.Dial(t, sockB)
	round := max(1, min(messages, verifyRegion/size))
	src, dst := apptest.Region(t, ca, round*size, client.LocalWrite), apptest.Region(t, cb, round*size, client.LocalWrite|client.RemoteWrite)
	var f writeFlow
	f.qa, f.qb = connectQPs(t, ctx, ca, cb, peer, engine, engine)
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer wcancel()
	start := time.Now()
	var cq [writeDepth]client.Completion
	for done, r := 0, 0; done < messages; r++ {
		n := min(round, messages-done)
		randomBytes(src.Bytes()[:n*size], uint64(r)+1)
		posted, completed := 0, 0
		for completed < n {
			for posted < n && posted-completed < writeDepth {
				off := posted * size
				_, err := f.qa.Post(client.WR{Op: client.OpWrite, WRID: uint64(done + posted), Stream: uint16(posted % writeStreams),
					Local: src, LocalOff: off, Length: size, RemoteAddr: dst.Addr + uint64(off), RemoteKey: dst.Key})
				if errors.Is(err, client.ErrSQFull) {
					break
				}
				if err != nil {
					t.Fatalf("post: %v", err)
				}
				posted++
			}
			k, err := f.qa.WaitCQ(wctx, cq[:])
			if err != nil {
				t.Fatalf("round %d: %d of %d WRITEs completed: %v", r, completed, n, err)
			}
			for _, c := range cq[:k] {
				if err := c.Err(); err != nil {
					t.Fatalf("WRITE %d: %v", c.WRID, err)
				}
			}
			completed += k
		}
		if !bytes.Equal(dst.Bytes()[:n*size], src.Bytes()[:n*size]) {
			t.Fatalf("round %d: the receiver's memory differs from what was written", r)
		}
		done += n
	}
	f.elapsed = time.Since(start)
	return f
}

// connectQPs connects a queue pair of ca on engine ea to one of cb on
// engine eb, whose engine answers at peer.
func connectQPs(t *testing.T, ctx context.Context, ca, cb *client.Client, peer netip.Addr, ea, eb int) (*client.QP, *client.QP) {
	t.Helper()
	qa, err := ca.CreateQP(client.QPOptions{Engine: ea})
	if err != nil {
		t.Fatal(err)
	}
	qb, err := cb.CreateQP(client.QPOptions{Engine: eb})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	acc := make(chan error, 1)
	go func() { _, err := qb.Accept(cctx); acc <- err }()
	if err := qa.Connect(cctx, peer, qb.Num, qb.Token); err != nil {
		t.Fatalf("engines %d, %d: connect: %v", ea, eb, err)
	}
	if err := <-acc; err != nil {
		t.Fatalf("engines %d, %d: accept: %v", ea, eb, err)
	}
	return qa, qb
}

// randomBytes fills b (a multiple of 8 bytes long) from seed.
func randomBytes(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
}

// gbps is the goodput of a flow that moved n bytes.
func (f writeFlow) gbps(n int) float64 { return float64(n) * 8 / f.elapsed.Seconds() / 1e9 }
