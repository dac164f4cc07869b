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
func TestArrivalFromKernel(t *testing.T) {
	mono := func() int64 {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		return ts.Nano()
	}
	for _, gso := range []bool{false, true} {
		ls := openLinks(t, Config{Local: lo1, GSO: gso}, Config{Local: lo2, GSO: gso})
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
