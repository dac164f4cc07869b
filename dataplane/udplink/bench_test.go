package udplink

import (
	"fmt"
	"testing"
)

// BenchmarkLoopback sends a batch of 64 packets from 127.0.0.1 to 127.0.0.2
// and receives it, per iteration: one sendmmsg and (normally) one recvmmsg.
// It reports packets per second and allocations per batch (the target is 0).
// Both ends run on the calling goroutine, so the figure is the cost of one
// core doing both halves, kernel included.
func BenchmarkLoopback(b *testing.B) {
	for _, size := range []int{64, 1400} {
		for _, gso := range []bool{false, true} {
			b.Run(fmt.Sprintf("%dB/gso=%s", size, onOff(gso)), func(b *testing.B) {
				ls := openLinks(b, Config{Local: lo1, GSO: gso}, Config{Local: lo2, GSO: gso})
				r := newRound(ls[0], ls[1], 64, size)
				r.run()
				r.lost, r.polled = 0, 0
				c0 := ls[1].Counters()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					r.run()
				}
				c := ls[1].Counters()
				pkts := float64(c.Received - c0.Received)
				b.ReportMetric(pkts/b.Elapsed().Seconds(), "pkts/s")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/pkts, "ns/pkt")
				b.ReportMetric(pkts/float64(c.RecvCalls-c0.RecvCalls), "pkts/recvmmsg")
				if r.lost > 0 {
					b.ReportMetric(float64(r.lost), "lost")
				}
			})
		}
	}
}
