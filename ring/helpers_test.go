package ring

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// newHeapRing lays a ring out in Go heap memory, 64-byte aligned, instead of
// a memfd. The race detector instruments heap accesses and not mmap'd ones,
// so the ordering tests run on both.
func newHeapRing(t testing.TB, slots, slotSize int) *Ring {
	t.Helper()
	g, err := checkGeometry(uint64(slots), uint64(slotSize))
	if err != nil {
		t.Fatal(err)
	}
	n := int(g.bytes())
	backing := make([]uint64, (n+2*cacheLine)/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&backing[0])), len(backing)*8)
	skip := int((cacheLine - uintptr(unsafe.Pointer(&mem[0]))%cacheLine) % cacheLine)
	mem = mem[skip : skip+n : skip+n]
	putHeader(mem, g)
	return newRing(mem, g)
}

// newMemfdRing is Create, closed at the end of the test.
func newMemfdRing(t testing.TB, slots, slotSize int) *Ring {
	t.Helper()
	r, err := Create(slots, slotSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// backings are the two kinds of ring memory every ordering test runs on.
var backings = []struct {
	name string
	make func(testing.TB, int, int) *Ring
}{
	{"heap", newHeapRing},
	{"memfd", newMemfdRing},
}

// setIndices is the test hook that starts a fresh ring's free-running
// indices at v (e.g. just below 2^32), before any view is made.
func setIndices(r *Ring, v uint32) {
	atomic.StoreUint32(r.prodWord, v)
	atomic.StoreUint32(r.consWord, v)
}

// putRecord fills a slot (16 bytes or more) with sequence number seq: seq in the first 8
// bytes, ^seq in the last 8, and seq's low byte in between, so a torn or
// stale slot shows.
func putRecord(s []byte, seq uint64) {
	binary.LittleEndian.PutUint64(s, seq)
	for i := 8; i < len(s)-8; i++ {
		s[i] = byte(seq) + byte(i)
	}
	binary.LittleEndian.PutUint64(s[len(s)-8:], ^seq)
}

// checkRecord reports how slot s differs from putRecord(s, seq).
func checkRecord(s []byte, seq uint64) error {
	if got := binary.LittleEndian.Uint64(s); got != seq {
		return fmt.Errorf("record %d: head says %d", seq, got)
	}
	if got := binary.LittleEndian.Uint64(s[len(s)-8:]); got != ^seq {
		return fmt.Errorf("record %d: tail says %#x", seq, got)
	}
	for i := 8; i < len(s)-8; i++ {
		if s[i] != byte(seq)+byte(i) {
			return fmt.Errorf("record %d: byte %d is %#x", seq, i, s[i])
		}
	}
	return nil
}

// pairConfig drives one producer goroutine against one consumer goroutine.
type pairConfig struct {
	items    uint64
	maxBatch uint32  // batch sizes are drawn from [1, maxBatch]
	partial  float64 // chance a Commit or Release takes fewer than it got
	bell     bool    // sleep on a doorbell when empty instead of spinning
	stall    uint64  // with bell: the producer pauses every stall items
}

// runPair moves cfg.items sequenced records through r and checks every one
// arrives once, in order, intact. The producer and consumer get their own
// random batch sizes and partial commits.
func runPair(t *testing.T, r *Ring, cfg pairConfig) {
	t.Helper()
	var ringer, waiter *Doorbell
	if cfg.bell {
		var err error
		if ringer, waiter, err = NewDoorbellPair(); err != nil {
			t.Fatal(err)
		}
		defer ringer.Close()
		defer waiter.Close()
	}
	prodErr := make(chan error, 1)
	var stop atomic.Bool // the consumer failed: a full ring must not hang the producer
	go func() { prodErr <- produce(r.Producer(), ringer, cfg, rand.New(rand.NewPCG(1, 2)), &stop) }()
	consErr := consume(r.Consumer(), waiter, cfg, rand.New(rand.NewPCG(3, 4)))
	if consErr != nil {
		stop.Store(true)
		t.Error("consumer: ", consErr)
	}
	if err := <-prodErr; err != nil {
		t.Fatal("producer: ", err)
	}
}

func batch(rng *rand.Rand, max uint32) uint32 { return 1 + rng.Uint32N(max) }

// take is how many of got a Commit or Release takes: all, or with chance
// partial, any number from 0 to got.
func take(rng *rand.Rand, got uint32, partial float64) uint32 {
	if got > 0 && rng.Float64() < partial {
		return rng.Uint32N(got + 1)
	}
	return got
}

func produce(p *Producer, bell *Doorbell, cfg pairConfig, rng *rand.Rand, stop *atomic.Bool) error {
	for seq := uint64(0); seq < cfg.items && !stop.Load(); {
		first, got, err := p.Reserve(min(batch(rng, cfg.maxBatch), uint32(min(cfg.items-seq, 1<<30))))
		if err != nil {
			return err
		}
		if got == 0 {
			runtime.Gosched()
			continue
		}
		for i := range got {
			putRecord(p.Slot(first+i), seq+uint64(i))
		}
		n := take(rng, got, cfg.partial)
		p.Commit(n)
		if bell != nil {
			if _, err := p.Notify(bell); err != nil {
				return err
			}
			if cfg.stall > 0 && seq/cfg.stall != (seq+uint64(n))/cfg.stall {
				time.Sleep(200 * time.Microsecond) // let the consumer fall asleep
			}
		}
		seq += uint64(n)
	}
	return nil
}

func consume(c *Consumer, bell *Doorbell, cfg pairConfig, rng *rand.Rand) error {
	for seq := uint64(0); seq < cfg.items; {
		first, got, err := c.Peek(batch(rng, cfg.maxBatch))
		if err != nil {
			return err
		}
		if got == 0 {
			if bell == nil {
				runtime.Gosched()
			} else if err := c.Wait(bell, 5*time.Second); err != nil {
				return fmt.Errorf("at record %d: %w", seq, err)
			}
			continue
		}
		n := take(rng, got, cfg.partial)
		for i := range n {
			if err := checkRecord(c.Slot(first+i), seq+uint64(i)); err != nil {
				return err
			}
		}
		c.Release(n)
		seq += uint64(n)
	}
	if a, err := c.Available(); err != nil || a != 0 {
		return fmt.Errorf("after the last record: %d more available (%v)", a, err)
	}
	return nil
}
