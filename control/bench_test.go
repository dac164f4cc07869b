package control_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/internal/apptest"
)

// BenchmarkPostToCompletion is the latency of one WRITE through the
// daemon on one host: post on the send queue, the engine posts it to the
// transport, the packet crosses loopback (UDP backend) to the other engine,
// the ack comes back, and the completion lands in the completion queue.
// B/op counts every allocation of both daemons and the client per
// request: a hidden copy of the payload would show as 64 KiB here.
//
// Both daemons and the client share this process here: GOMAXPROCS is
// raised so that an engine blocked in ppoll, which keeps its P until the
// runtime's sysmon takes it back (up to milliseconds when idle), does not
// hold the client's goroutine off a P. Separate processes have no such
// coupling.
func BenchmarkPostToCompletion(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	for _, size := range []int{64, 65536} {
		b.Run(sizeName(size), func(b *testing.B) {
			ha, hb := apptest.Pair(b)
			ca, cb := apptest.Dial(b, ha.Sock), apptest.Dial(b, hb.Sock)
			src := apptest.Region(b, ca, size, 0)
			dst := apptest.Region(b, cb, size, client.RemoteWrite)
			qa, _ := pair(b, ca, cb, hb.Addr)
			var c [1]client.Completion
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := qa.PostWrite(uint64(i), src, 0, size, dst.Addr, dst.Key); err != nil {
					b.Fatal(err)
				}
				if _, err := qa.WaitCQ(context.Background(), c[:]); err != nil || c[0].Err() != nil {
					b.Fatal(err, c[0].Err())
				}
			}
		})
	}
}

func sizeName(n int) string {
	if n >= 1024 {
		return strconv.Itoa(n/1024) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
