package ring

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
)

// TestPairInOrder runs a producer and a consumer goroutine over every
// backing, with indices starting at 0 and just below 2^32 so they wrap
// mid-run, small and large rings, batch sizes from 1 to past the ring size,
// and partial commits and releases.
func TestPairInOrder(t *testing.T) {
	items := uint64(2 << 20)
	if raceOn {
		items = 1 << 19
	}
	if testing.Short() {
		items = 1 << 16
	}
	cases := []struct {
		slots, slotSize int
		start           uint32
		cfg             pairConfig
	}{
		{64, 16, 0, pairConfig{maxBatch: 16}},
		{64, 16, 1<<32 - 1000, pairConfig{maxBatch: 70, partial: 0.1}},
		{1024, 64, 1<<32 - 512, pairConfig{maxBatch: 64}},
		{1, 16, 1<<32 - 3, pairConfig{maxBatch: 3, partial: 0.2}},
		{4096, 32, 1<<32 - 100_000, pairConfig{maxBatch: 256, partial: 0.05}},
	}
	for _, b := range backings {
		for _, tc := range cases {
			name := fmt.Sprintf("%s/%dx%d/start=%#x", b.name, tc.slots, tc.slotSize, tc.start)
			t.Run(name, func(t *testing.T) {
				r := b.make(t, tc.slots, tc.slotSize)
				setIndices(r, tc.start)
				cfg := tc.cfg
				cfg.items = items
				if tc.slots == 1 {
					cfg.items /= 16 // one slot: a context switch per record
				}
				runPair(t, r, cfg)
				if end := tc.start + uint32(cfg.items); atomic.LoadUint32(r.prodWord) != end || atomic.LoadUint32(r.consWord) != end {
					t.Errorf("indices end at %#x/%#x, want %#x",
						atomic.LoadUint32(r.prodWord), atomic.LoadUint32(r.consWord), end)
				}
			})
		}
	}
}

// TestFullAndEmpty checks the edges in one goroutine: a full ring reserves
// nothing, an empty one peeks nothing, across the 2^32 wrap.
func TestFullAndEmpty(t *testing.T) {
	r := newHeapRing(t, 8, 16)
	setIndices(r, 1<<32-3)
	p, c := r.Producer(), r.Consumer()
	for round := range 5 {
		if _, got, _ := c.Peek(1); got != 0 {
			t.Fatalf("round %d: empty ring peeked %d", round, got)
		}
		first, got, err := p.Reserve(100)
		if err != nil || got != 8 {
			t.Fatalf("round %d: Reserve(100) on an empty ring = %d, %v", round, got, err)
		}
		if _, more, _ := p.Reserve(1); more != 0 {
			t.Fatalf("round %d: reserved past full", round)
		}
		for i := range got {
			putRecord(p.Slot(first+i), uint64(first+i))
		}
		p.Commit(got)
		if _, more, _ := p.Reserve(1); more != 0 {
			t.Fatalf("round %d: full ring reserved %d", round, more)
		}
		if f, _ := p.Free(); f != 0 {
			t.Fatalf("round %d: full ring has %d free", round, f)
		}
		cf, cgot, err := c.Peek(100)
		if err != nil || cgot != 8 || cf != first {
			t.Fatalf("round %d: Peek(100) = %d, %d, %v; want %d, 8", round, cf, cgot, err, first)
		}
		for i := range cgot {
			if err := checkRecord(c.Slot(cf+i), uint64(cf+i)); err != nil {
				t.Fatal(err)
			}
		}
		c.Release(cgot)
	}
}

// TestPartialCommitAndRelease pins down the batch semantics: what is not
// committed or released is handed out again.
func TestPartialCommitAndRelease(t *testing.T) {
	r := newHeapRing(t, 16, 16)
	p, c := r.Producer(), r.Consumer()
	first, got, _ := p.Reserve(10)
	for i := range got {
		putRecord(p.Slot(first+i), uint64(i))
	}
	p.Commit(4) // records 0..3; 4..9 go back
	if f, _ := p.Free(); f != 12 {
		t.Fatalf("free after committing 4 of 16: %d", f)
	}
	first, got, _ = p.Reserve(2)
	if first != 4 || got != 2 {
		t.Fatalf("Reserve after a partial commit = %d, %d; want 4, 2", first, got)
	}
	p.Commit(0) // cancels
	cf, cgot, _ := c.Peek(10)
	if cf != 0 || cgot != 4 {
		t.Fatalf("Peek = %d, %d; want 0, 4", cf, cgot)
	}
	c.Release(1)
	cf, cgot, _ = c.Peek(10)
	if cf != 1 || cgot != 3 {
		t.Fatalf("Peek after Release(1) = %d, %d; want 1, 3", cf, cgot)
	}
	for i := range cgot {
		if err := checkRecord(c.Slot(cf+i), uint64(cf+i)); err != nil {
			t.Fatal(err)
		}
	}
	c.Release(0)
	if cf, cgot, _ = c.Peek(10); cf != 1 || cgot != 3 {
		t.Fatalf("Peek after Release(0) = %d, %d; want 1, 3 again", cf, cgot)
	}
}

func TestMisuseOfOwnViewPanics(t *testing.T) {
	r := newHeapRing(t, 8, 8)
	p, c := r.Producer(), r.Consumer()
	first, _, _ := p.Reserve(2)
	mustPanic(t, "Producer.Slot past the reservation", func() { p.Slot(first + 2) })
	mustPanic(t, "Commit past the reservation", func() { p.Commit(3) })
	p.Commit(2)
	mustPanic(t, "Producer.Slot of a committed slot", func() { p.Slot(first) })
	cf, _, _ := c.Peek(1)
	mustPanic(t, "Consumer.Slot past the peeked range", func() { c.Slot(cf + 1) })
	mustPanic(t, "Release past the peeked range", func() { c.Release(2) })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if v := recover(); v == nil {
			t.Errorf("%s: no panic", what)
		} else if !strings.HasPrefix(fmt.Sprint(v), "ring: ") {
			t.Errorf("%s: panic %v", what, v)
		}
	}()
	f()
}

// TestHostileProducerIndex plays a hostile producer writing the producer
// word: a consumer accepts exactly the values a correct producer could have
// written and fails with a sticky ErrCorrupt on any other, and whatever it
// accepts, every slot it hands out lies inside the slot array.
func TestHostileProducerIndex(t *testing.T) {
	const slots = 64
	for _, start := range []uint32{0, 1<<32 - 10} {
		bad := []uint32{
			start + slots + 1, start + 1<<31, start - 1, start + 2*slots, start - slots,
		}
		for _, v := range bad {
			r := newMemfdRing(t, slots, 8)
			setIndices(r, start)
			c := r.Consumer()
			atomic.StoreUint32(r.prodWord, v)
			if _, got, err := c.Peek(1); !errors.Is(err, ErrCorrupt) || got != 0 {
				t.Errorf("start %#x: producer index %#x: Peek = %d, %v; want ErrCorrupt", start, v, got, err)
			}
			atomic.StoreUint32(r.prodWord, start+1) // back to sane: too late
			if _, _, err := c.Peek(1); !errors.Is(err, ErrCorrupt) {
				t.Errorf("ErrCorrupt is not sticky: %v", err)
			}
			if err := c.Wait(nil, 0); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Wait on a corrupt ring: %v", err)
			}
		}
	}

	// A producer index moved back behind slots already peeked.
	r := newHeapRing(t, slots, 8)
	c := r.Consumer()
	atomic.StoreUint32(r.prodWord, 10)
	if _, got, err := c.Peek(8); got != 8 || err != nil {
		t.Fatalf("Peek(8) of 10 = %d, %v", got, err)
	}
	atomic.StoreUint32(r.prodWord, 5)
	if _, _, err := c.Peek(8); !errors.Is(err, ErrCorrupt) {
		t.Errorf("producer index moved behind the peeked range: %v", err)
	}

	// Random values: accepted ones hand out in-bounds slots, all others fail.
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		r := newHeapRing(t, slots, 8)
		start := rng.Uint32()
		setIndices(r, start)
		c := r.Consumer()
		v := rng.Uint32()
		if rng.IntN(2) == 0 {
			v = start + rng.Uint32N(2*slots)
		}
		atomic.StoreUint32(r.prodWord, v)
		first, got, err := c.Peek(1 << 20)
		if ok := v-start <= slots; ok != (err == nil) {
			t.Fatalf("start %#x producer %#x: Peek err %v", start, v, err)
		}
		if err == nil && got != v-start {
			t.Fatalf("start %#x producer %#x: got %d", start, v, got)
		}
		for i := range got {
			if s := c.Slot(first + i); len(s) != 8 {
				t.Fatal("short slot")
			}
		}
	}
}

// TestHostileConsumerIndex does the same to a producer: a consumer index
// ahead of what was published, or more than a ring behind, is ErrCorrupt.
func TestHostileConsumerIndex(t *testing.T) {
	const slots = 64
	for _, v := range []uint32{5, 1 << 31, 1<<32 - slots - 1} {
		r := newHeapRing(t, slots, 8)
		p := r.Producer()
		atomic.StoreUint32(r.consWord, v)
		if _, got, err := p.Reserve(slots + 1); !errors.Is(err, ErrCorrupt) || got != 0 {
			t.Errorf("consumer index %#x: Reserve = %d, %v; want ErrCorrupt", v, got, err)
		}
		if _, err := p.Notify(nil); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Notify on a corrupt ring: %v", err)
		}
	}
	// Moved back so far that the current reservation would overrun it.
	r := newHeapRing(t, slots, 8)
	p := r.Producer()
	first, got, _ := p.Reserve(slots)
	for i := range got {
		putRecord(p.Slot(first+i), 0)
	}
	p.Commit(slots)
	atomic.StoreUint32(r.consWord, slots) // consumed everything
	if _, got, err := p.Reserve(10); got != 10 || err != nil {
		t.Fatalf("Reserve after the consumer caught up = %d, %v", got, err)
	}
	atomic.StoreUint32(r.consWord, 1) // and back
	if _, _, err := p.Reserve(slots); !errors.Is(err, ErrCorrupt) {
		t.Errorf("consumer index moved back under a reservation: %v", err)
	}
}
