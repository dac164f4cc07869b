package udplink

import (
	"fmt"
	"testing"
)

// BenchmarkLoopback sends a batch of 64 packets from 127.0.0.1 to 127.0.0.2
// and receives it, per iteration. It reports packets per second, the
// sendmmsg calls per batch and packets per sendmmsg (the cost of sending
// from several sockets), and allocations per batch (the target is 0). Both
// ends run on the calling goroutine, so the figure is the cost of one core
// doing both halves, kernel included.
//
// spray=0 sends every packet from the link's port (one socket: one
// sendmmsg per batch); spray=N sends packet i from source port lo + i%N of
// a pool of N send sockets, so that no two consecutive packets share a
// socket, as the transport sprays them: N sendmmsg calls per batch, and
// with GSO each socket's 64/N packets still form one run.
func BenchmarkLoopback(b *testing.B) {
	for _, spray := range []int{0, 4, 16, 64} {
		for _, size := range []int{64, 1400} {
			for _, gso := range []bool{false, true} {
				b.Run(fmt.Sprintf("spray=%d/%dB/gso=%s", spray, size, onOff(gso)), func(b *testing.B) {
					ls := openLinks(b, Config{Local: lo1, GSO: gso, SrcPorts: spray}, Config{Local: lo2, GSO: gso})
					r := newRound(ls[0], ls[1], 64, size)
					r.spray = spray
					r.run()
					r.lost, r.polled = 0, 0
					c0, s0 := ls[1].Counters(), ls[0].Counters()
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						r.run()
					}
					c, s := ls[1].Counters(), ls[0].Counters()
					pkts := float64(c.Received - c0.Received)
					calls := float64(s.SendCalls - s0.SendCalls)
					b.ReportMetric(pkts/b.Elapsed().Seconds(), "pkts/s")
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/pkts, "ns/pkt")
					b.ReportMetric(pkts/float64(c.RecvCalls-c0.RecvCalls), "pkts/recvmmsg")
					b.ReportMetric(calls/float64(b.N), "sendmmsg/batch")
					b.ReportMetric(float64(s.Sent-s0.Sent)/calls, "pkts/sendmmsg")
					if r.lost > 0 {
						b.ReportMetric(float64(r.lost), "lost")
					}
				})
			}
		}
	}
}
