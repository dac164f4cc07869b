package xsk

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
)

// TestWaitWakesOnArrival: a thread already asleep in Wait is woken by a
// frame's arrival, not by its timeout. An idle engine sleeps this way
// (dataplane's Engine.sleep polls the socket's descriptor), so a receive
// that did not wake it would wait out the engine's whole sleep.
// TestWaitAndStats covers a frame that is there before Wait.
func TestWaitWakesOnArrival(t *testing.T) {
	a, b := newPair(t, Config{}, testnet.LinkConfig{}, 0, false)
	f := a.spec(b, false)
	if _, err := b.sock.Refill(64); err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		type result struct {
			ready bool
			err   error
		}
		done := make(chan result, 1)
		go func() {
			ready, err := b.sock.Wait(10*time.Second, false)
			done <- result{ready, err}
		}()
		time.Sleep(20 * time.Millisecond) // the waiter is asleep in ppoll by then
		addr, _ := a.sock.Pool().Get()
		d := []Desc{{Addr: addr, Len: uint32(f.build(a.sock.FrameBuf(addr), uint64(round), 18))}}
		if q, err := a.sock.Transmit(d); err != nil || q != 1 {
			t.Fatalf("Transmit = %d, %v", q, err)
		}
		if r := <-done; r.err != nil || !r.ready {
			t.Fatalf("round %d: Wait = %v, %v: not woken by the frame", round, r.ready, r.err)
		}
		got := make([]Desc, 4)
		if n := b.sock.Receive(got); n != 1 {
			t.Fatalf("round %d: received %d", round, n)
		}
		if _, err := b.sock.Refill(64); err != nil {
			t.Fatal(err)
		}
		a.sock.Complete()
	}
}
