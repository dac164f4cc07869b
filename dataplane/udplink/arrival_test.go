package udplink

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/dataplane"
)

// TestArrivalFromKernel: with and without GRO, every received packet
// carries the kernel's receive time (SO_TIMESTAMPNS) on CLOCK_MONOTONIC,
// between its sending and the moment Receive returned it, though the test
// lets it wait 20 ms in the socket first: the wait is host delay the
// engine's own clock would count.
//
// The kernel turns receive stamping on for the whole host in a deferred
// work item when the first socket asks for it; until that has run (in CI,
// where this is the first such socket of the boot, the first packets were
// seen stamped 20 ms late) the kernel stamps a packet when it is read.
// waitStamping waits for that before the measured run.
func TestArrivalFromKernel(t *testing.T) {
	mono := func() int64 {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		return ts.Nano()
	}
	for _, gso := range []bool{false, true} {
		ls := openLinks(t, Config{Local: lo1, GSO: gso}, Config{Local: lo2, GSO: gso})
		waitStamping(t, ls[0], ls[1], mono)
		sent := mono()
		sendBatch(t, ls[0], lo2, 0, 16, func(uint32) int { return 1000 })
		time.Sleep(20 * time.Millisecond)
		batch := make([]dataplane.RxPacket, 32)
		n := 0
		for tries := 0; n < 16 && tries < 100; tries++ {
			k := ls[1].Receive(batch[n:])
			after := mono()
			for _, p := range batch[n : n+k] {
				if p.Arrival == 0 {
					t.Fatalf("gso %v: a packet without an arrival time", gso)
				}
				if p.Arrival < sent || p.Arrival > after-int64(15*time.Millisecond) {
					t.Errorf("gso %v: arrival %v after sending, %v before Receive returned (slept 20 ms between)",
						gso, time.Duration(p.Arrival-sent), time.Duration(after-p.Arrival))
				}
			}
			n += k
			if k == 0 {
				ls[1].Poll(10 * time.Millisecond)
			}
		}
		ls[1].Release(batch[:n])
		if n != 16 {
			t.Fatalf("gso %v: %d of 16 packets", gso, n)
		}
	}
}

// waitStamping sends one packet at a time from a to b until one arrives
// stamped before it was read (at least 2 ms between), or fails after a
// second: the kernel's stamping is on for the host.
func waitStamping(t *testing.T, a, b *Link, mono func() int64) {
	t.Helper()
	batch := make([]dataplane.RxPacket, 4)
	for try := range 200 {
		sendBatch(t, a, lo2, uint32(1000+try), 1, func(uint32) int { return 100 })
		time.Sleep(5 * time.Millisecond)
		k := b.Receive(batch)
		after := mono()
		stamped := false
		for _, p := range batch[:k] {
			stamped = stamped || (p.Arrival != 0 && p.Arrival < after-int64(2*time.Millisecond))
		}
		b.Release(batch[:k])
		if stamped {
			return
		}
	}
	t.Fatal("no packet in a second carried a receive stamp earlier than its read: the kernel does not stamp on receive")
}
