package udplink

import (
	"fmt"
	"testing"
	"time"

	"github.com/metaroce/metaroce/dataplane"
)

// TestPoll: Poll returns when nothing comes (after its timeout, or at once
// for 0), and wakes for a packet that arrives while it waits. Nothing here
// asserts how long anything took.
func TestPoll(t *testing.T) {
	ls := openLinks(t, Config{Local: lo1}, Config{Local: lo2})
	a, b := ls[0], ls[1]
	for _, d := range []time.Duration{0, time.Microsecond, 20 * time.Millisecond} {
		if err := b.Poll(d); err != nil {
			t.Fatalf("Poll(%v): %v", d, err)
		}
	}
	if k := b.Receive(make([]dataplane.RxPacket, 4)); k != 0 {
		t.Fatalf("Receive on an idle link = %d", k)
	}

	// b waits with no timeout in a goroutine of its own (it is b's only
	// user meanwhile); a sends. If Poll never woke, the test would hang.
	done := make(chan error)
	go func() { done <- b.Poll(-1) }()
	sendBatch(t, a, lo2, 0, 1, func(uint32) int { return 64 })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkSeq(t, recvN(t, b, 1, 4), 0, lo1, func(uint32) int { return 64 })

	// Readable already: Poll with a long timeout returns.
	sendBatch(t, a, lo2, 1, 1, func(uint32) int { return 64 })
	if err := b.Poll(time.Hour); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, recvN(t, b, 1, 4), 1, lo1, func(uint32) int { return 64 })
}

// TestNoAllocs: a send and receive round of a full batch allocates nothing,
// with and without GSO/GRO, from one socket and sprayed over a pool of 16
// send sockets.
func TestNoAllocs(t *testing.T) {
	for _, spray := range []int{0, 16} {
		for _, gso := range []bool{false, true} {
			t.Run(fmt.Sprintf("spray=%d/gso=%s", spray, onOff(gso)), func(t *testing.T) {
				ls := openLinks(t, Config{Local: lo1, GSO: gso, SrcPorts: spray}, Config{Local: lo2, GSO: gso})
				r := newRound(ls[0], ls[1], 64, 1400)
				r.spray = spray
				r.run() // warm up
				c0 := ls[0].Counters()
				if n := testing.AllocsPerRun(100, func() { r.run() }); n != 0 {
					t.Fatalf("%v allocations per round", n)
				}
				if r.lost != 0 {
					t.Logf("%d packets lost on loopback", r.lost)
				}
				if c := ls[0].Counters(); c.Sent == c0.Sent {
					t.Fatal("nothing sent")
				}
			})
		}
	}
}

// round is one batch sent from a to b and received, the unit of the
// allocation test and the benchmark. Its scratch is allocated once.
type round struct {
	a, b   *Link
	tx     []dataplane.TxPacket
	rx     []dataplane.RxPacket
	size   int
	lost   int
	polled int
	// spray, when not 0, sends packet i from source port lo + i%spray of
	// a's pool (lo..): consecutive packets on different sockets, as the
	// transport sprays them.
	spray int
}

func newRound(a, b *Link, n, size int) *round {
	return &round{a: a, b: b, tx: make([]dataplane.TxPacket, n), rx: make([]dataplane.RxPacket, n), size: size}
}

func (r *round) run() {
	n := r.a.ReserveTx(r.tx)
	dst := r.b.LocalAddr().Addr()
	lo, _, _ := r.a.SrcPortRange()
	for i := range r.tx[:n] {
		r.tx[i].Len, r.tx[i].Dst = r.size, dst
		if r.spray > 0 {
			r.tx[i].SrcPort = lo + uint16(i%r.spray)
		}
	}
	if err := r.a.SubmitTx(r.tx[:n]); err != nil {
		panic(err)
	}
	for got := 0; got < n; {
		k := r.b.Receive(r.rx)
		if k == 0 {
			// Loopback drops nothing the receive buffer has room for, but
			// never wait for ever: a Poll that times out counts the rest as
			// lost.
			r.polled++
			if err := r.b.Poll(100 * time.Millisecond); err != nil {
				panic(err)
			}
			if k = r.b.Receive(r.rx); k == 0 {
				r.lost += n - got
				return
			}
		}
		got += k
		r.b.Release(r.rx[:k])
	}
}
