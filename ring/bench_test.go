package ring

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkBatchSameGoroutine is the cost of the ring itself: one goroutine
// reserves, writes, commits, peeks, reads and releases a batch; ns/op is per
// slot, both directions together, no contention.
func BenchmarkBatchSameGoroutine(b *testing.B) {
	for _, n := range []uint32{1, 8, 32, 128} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			r := newMemfdRing(b, 1024, 64)
			p, c := r.Producer(), r.Consumer()
			b.ReportAllocs()
			b.SetBytes(8)
			var sum uint64
			for done := 0; done < b.N; {
				first, got, _ := p.Reserve(n)
				for i := range got {
					binary.LittleEndian.PutUint64(p.Slot(first+i), uint64(i))
				}
				p.Commit(got)
				cf, cgot, _ := c.Peek(n)
				for i := range cgot {
					sum += binary.LittleEndian.Uint64(c.Slot(cf + i))
				}
				c.Release(cgot)
				done += int(cgot)
			}
			_ = sum
		})
	}
}

// BenchmarkBatchTwoGoroutines streams 8-byte records from a producer
// goroutine to a consumer goroutine (two cores, spinning); ns/op is per slot.
func BenchmarkBatchTwoGoroutines(b *testing.B) {
	for _, n := range []uint32{1, 8, 32, 128} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			r := newMemfdRing(b, 1024, 64)
			p, c := r.Producer(), r.Consumer()
			b.ReportAllocs()
			b.SetBytes(8)
			total := uint64(b.N)
			go func() {
				for seq := uint64(0); seq < total; {
					first, got, _ := p.Reserve(uint32(min(uint64(n), total-seq)))
					if got == 0 {
						runtime.Gosched()
						continue
					}
					for i := range got {
						binary.LittleEndian.PutUint64(p.Slot(first+i), seq+uint64(i))
					}
					p.Commit(got)
					seq += uint64(got)
				}
			}()
			for seq := uint64(0); seq < total; {
				first, got, _ := c.Peek(n)
				if got == 0 {
					runtime.Gosched()
					continue
				}
				for i := range got {
					if binary.LittleEndian.Uint64(c.Slot(first+i)) != seq+uint64(i) {
						b.Fatal("out of order")
					}
				}
				c.Release(got)
				seq += uint64(got)
			}
		})
	}
}

// BenchmarkPingPong is producer-to-consumer latency: one record goes out on
// one ring and comes back on another; ns/op is one round trip (two one-way
// hops). spin busy-polls; doorbell sleeps on the eventfd every time, so it
// measures the wakeup path (two datagrams, two poll wakeups).
func BenchmarkPingPong(b *testing.B) {
	for _, mode := range []string{"spin", "doorbell"} {
		b.Run(mode, func(b *testing.B) {
			req, rep := newMemfdRing(b, 64, 16), newMemfdRing(b, 64, 16)
			mine, theirs := newBells(b) // each side rings and waits on its own end
			wait := func(c *Consumer, bell *Doorbell) {
				if mode == "spin" {
					for a, _ := c.Available(); a == 0; a, _ = c.Available() {
					}
					return
				}
				if err := c.Wait(bell, 10*time.Second); err != nil {
					panic(err)
				}
			}
			n := uint64(b.N)
			go func() {
				c, p := req.Consumer(), rep.Producer()
				for range n {
					wait(c, theirs)
					first, _, _ := c.Peek(1)
					pf, _, _ := p.Reserve(1)
					copy(p.Slot(pf), c.Slot(first))
					c.Release(1)
					p.Commit(1)
					p.Notify(theirs)
				}
			}()
			p, c := req.Producer(), rep.Consumer()
			b.ReportAllocs()
			b.ResetTimer()
			for seq := range n {
				first, _, _ := p.Reserve(1)
				binary.LittleEndian.PutUint64(p.Slot(first), seq)
				p.Commit(1)
				p.Notify(mine)
				wait(c, mine)
				cf, _, _ := c.Peek(1)
				if binary.LittleEndian.Uint64(c.Slot(cf)) != seq {
					b.Fatal("wrong reply")
				}
				c.Release(1)
			}
		})
	}
}

// BenchmarkCrossProcessStream is throughput from a child process producing
// 64-byte records in batches of up to 64 to the parent; ns/op is per record.
// The timer starts at the first record, so the child's start-up is not in it.
func BenchmarkCrossProcessStream(b *testing.B) {
	r := newMemfdRing(b, 1024, 64)
	bell, child := newBells(b)
	n := uint64(b.N)
	cmd, out := startChild(b, "produce", n, 0, r.FD(), child.FD())
	c := r.Consumer()
	b.ReportAllocs()
	b.SetBytes(64)
	for seq := uint64(0); seq < n; {
		first, got, err := c.Peek(64)
		if err != nil {
			b.Fatal(err)
		}
		if got == 0 {
			if err := spinWait(c, bell); err != nil {
				b.Fatalf("%v; child: %s", err, out)
			}
			continue
		}
		if seq == 0 {
			b.ResetTimer()
		}
		for i := range got {
			if binary.LittleEndian.Uint64(c.Slot(first+i)) != seq+uint64(i) {
				b.Fatal("out of order")
			}
		}
		c.Release(got)
		seq += uint64(got)
	}
	b.StopTimer()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("child: %v\n%s", err, out)
	}
}

// BenchmarkCrossProcessPingPong is the round trip to an echoing child
// process through two rings: spin first, then the doorbell.
func BenchmarkCrossProcessPingPong(b *testing.B) {
	req, rep := newMemfdRing(b, 64, 16), newMemfdRing(b, 64, 16)
	bell, child := newBells(b)
	reqBell, repBell := bell, bell
	n := uint64(b.N)
	cmd, out := startChild(b, "echo", n+1, 0, req.FD(), rep.FD(), child.FD())
	p, c := req.Producer(), rep.Consumer()
	b.ReportAllocs()
	for seq := range n + 1 { // record 0 waits for the child to start
		if seq == 1 {
			b.ResetTimer()
		}
		first, _, _ := p.Reserve(1)
		binary.LittleEndian.PutUint64(p.Slot(first), seq)
		p.Commit(1)
		p.Notify(reqBell)
		for {
			if a, _ := c.Available(); a > 0 {
				break
			}
			if err := spinWait(c, repBell); err != nil {
				b.Fatalf("%v; child: %s", err, out)
			}
		}
		cf, _, _ := c.Peek(1)
		if binary.LittleEndian.Uint64(c.Slot(cf)) != seq {
			b.Fatal("wrong reply")
		}
		c.Release(1)
	}
	b.StopTimer()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("child: %v\n%s", err, out)
	}
}
